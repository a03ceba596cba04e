package dev.idem.examples.orders;

import dev.idem.Handler;
import io.r2dbc.spi.ConnectionFactory;
import org.springframework.r2dbc.connection.ConnectionHolder;
import org.springframework.transaction.reactive.TransactionContextManager;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import reactor.core.publisher.Flux;

/**
 * Lets a handler whose Spring Data R2DBC repositories (or {@code DatabaseClient}) join the
 * message's transaction run under {@code HandlerContract}, whose transactions are plain R2DBC
 * ones, not the starter's {@code SpringTransactionRunner}. In the application, the repositories
 * join by finding the transaction's connection bound to their {@link ConnectionFactory} in
 * Spring's reactive transaction context; this binds the {@code Tx}'s connection there, as an
 * active transaction's, the way Spring's {@code R2dbcTransactionManager} binds its own. So every
 * repository statement runs on the message's connection and counts as one of the handler's
 * statements (where the runner injects its failures), while a write that leaves the handler's
 * reactive chain (a publisher subscribed without its context) takes a connection of its own from
 * the pool, commits on its own, and the contract finds it.
 *
 * <p>Not modelled: Spring's transaction synchronization is not active, so a handler that calls
 * {@code @Transactional} services (a failing one marks the transaction rollback-only, which the
 * starter turns into a rollback; here it would commit) or uses another {@code ConnectionFactory}
 * is not run as in the application. Test such handlers with the application
 * ({@code @SpringBootTest}).
 */
final class SpringTransactionJoin {

  private SpringTransactionJoin() {}

  /**
   * The handler, its repositories joined to the message's transaction.
   *
   * @param handler the application's handler
   * @param connectionFactory the application's {@code ConnectionFactory} bean, the one its
   *     repositories use (and the one the contract is given)
   * @param <T> the payload type
   * @return a handler for {@code HandlerContract.forHandler}
   */
  static <T> Handler<T> joined(Handler<T> handler, ConnectionFactory connectionFactory) {
    return (payload, tx) -> TransactionSynchronizationManager.forCurrentTransaction()
        .flatMapMany(transaction -> {
          transaction.bindResource(connectionFactory, new ConnectionHolder(tx.connection(), true));
          return Flux.from(handler.handle(payload, tx))
              .doFinally(signal -> transaction.unbindResourceIfPossible(connectionFactory));
        })
        .contextWrite(TransactionContextManager.createTransactionContext());
  }
}
