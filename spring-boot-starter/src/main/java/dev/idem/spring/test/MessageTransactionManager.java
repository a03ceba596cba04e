package dev.idem.spring.test;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.R2dbcRollbackException;
import java.io.Serial;
import org.jspecify.annotations.Nullable;
import org.springframework.r2dbc.connection.ConnectionHolder;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.reactive.AbstractReactiveTransactionManager;
import org.springframework.transaction.reactive.GenericReactiveTransaction;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import reactor.core.publisher.Mono;

/**
 * A Spring reactive transaction over a transaction that someone else began and ends: the
 * message's, whose connection the contract's runner holds. "Begin" binds that connection to the
 * application's {@link ConnectionFactory} as an active transaction's (as
 * {@code R2dbcTransactionManager} binds its own), so Spring Data R2DBC, {@code DatabaseClient}
 * and {@code @Transactional} methods on that factory join it; "commit" runs Spring's commit
 * processing (synchronization callbacks) and fails with an {@link R2dbcRollbackException} when a
 * participant marked the transaction rollback-only, as the starter's runner does at its COMMIT;
 * neither commit nor rollback sends anything to the server (the runner does, after the handler).
 * One instance per message: it carries that message's connection.
 */
final class MessageTransactionManager extends AbstractReactiveTransactionManager {

  @Serial private static final long serialVersionUID = 1L;

  private final transient ConnectionFactory connectionFactory;
  private final transient Connection connection;

  MessageTransactionManager(ConnectionFactory connectionFactory, Connection connection) {
    this.connectionFactory = connectionFactory;
    this.connection = connection;
  }

  /** The state of one joined transaction: its holder, once bound. */
  private static final class Joined {
    @Nullable ConnectionHolder holder;
  }

  @Override
  protected Object doGetTransaction(TransactionSynchronizationManager synchronizationManager) {
    return new Joined();
  }

  @Override
  protected Mono<Void> doBegin(TransactionSynchronizationManager synchronizationManager, Object transaction,
      TransactionDefinition definition) {
    return Mono.fromRunnable(() -> {
      ConnectionHolder holder = new ConnectionHolder(connection, true);
      synchronizationManager.bindResource(connectionFactory, holder);
      ((Joined) transaction).holder = holder;
    });
  }

  @Override
  protected Mono<Void> doCommit(TransactionSynchronizationManager synchronizationManager,
      GenericReactiveTransaction status) {
    return Mono.defer(() -> {
      ConnectionHolder holder = ((Joined) status.getTransaction()).holder;
      if (holder != null && holder.isRollbackOnly()) {
        return Mono.error(new R2dbcRollbackException("The transaction was marked rollback-only by a participating "
            + "transaction (for example a @Transactional method that failed inside the handler); it is rolled back, "
            + "not committed"));
      }
      return Mono.empty();
    });
  }

  @Override
  protected Mono<Void> doRollback(TransactionSynchronizationManager synchronizationManager,
      GenericReactiveTransaction status) {
    return Mono.empty(); // the handler's error reaches the runner, which rolls the message's transaction back
  }

  @Override
  protected Mono<Void> doCleanupAfterCompletion(TransactionSynchronizationManager synchronizationManager,
      Object transaction) {
    return Mono.fromRunnable(() -> synchronizationManager.unbindResourceIfPossible(connectionFactory));
  }
}
