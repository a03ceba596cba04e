package dev.idem.spring.test;

import dev.idem.BatchHandler;
import dev.idem.Handler;
import dev.idem.spring.SpringTransactionRunner;
import dev.idem.test.HandlerContract;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.Objects;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;

/**
 * idem-test's {@link HandlerContract} for the handler of a Spring Boot application whose Spring
 * Data R2DBC repositories, {@code DatabaseClient} or {@code @Transactional} services join the
 * message's transaction. Needs {@code dev.idem:idem-test} on the test class path (the starter
 * declares it optional; its version comes from {@code idem-bom}).
 *
 * <pre>{@code
 * @Autowired ConnectionFactory connectionFactory;   // the application's, the repositories' own
 * @Autowired AccountRepository accounts;
 *
 * @Test
 * void thePaymentHandlerKeepsItsEffectsExactlyOnce() {
 *   SpringHandlerContracts.forHandler("payment handler", () -> new PaymentHandler(accounts), connectionFactory)
 *       .reset("UPDATE accounts SET balance = 0")
 *       .probe("SELECT id, balance FROM accounts ORDER BY id")
 *       .messages(InMemoryDelivery.of("pay-1", new Payment(1, 500)).withKey("1"))
 *       .build()
 *       .verify();
 * }
 * }</pre>
 *
 * <p>Why it is needed: in the application the starter's {@link SpringTransactionRunner} runs each
 * message in a Spring transaction, and repositories join it by finding its connection bound to
 * their {@code ConnectionFactory} in Spring's reactive transaction context. The contract runs its
 * own plain R2DBC transactions; given the bare handler, the repositories would find no
 * transaction, write on connections of their own in autocommit, and the contract would rightly
 * report {@link dev.idem.test.Mistake#EFFECT_OUTSIDE_TRANSACTION}.
 *
 * <p>What the joined handler guarantees, for every call:
 * <ul>
 *   <li>it runs inside a Spring reactive transaction whose connection is the message's
 *       {@code tx.connection()} (the contract's instrumented one), bound to the given
 *       {@code ConnectionFactory} as an active transaction's. Every statement of a repository,
 *       {@code DatabaseClient}, {@code R2dbcEntityTemplate} or {@code @Transactional} method
 *       (propagation {@code REQUIRED}, the default) on that factory runs on it: it commits and
 *       rolls back with the message, and counts as one of the handler's statements, after which
 *       the contract injects its failures;</li>
 *   <li>a write that leaves the handler's reactive chain (a publisher subscribed without its
 *       context: {@code subscribe()}, {@code toFuture()}, {@code block()} on another thread) or
 *       uses another {@code ConnectionFactory} takes a connection of its own and commits on its
 *       own, as in the application; the contract reports it;</li>
 *   <li>Spring's transaction synchronization is active, as under the starter's runner: a
 *       participating {@code @Transactional} method that fails marks the transaction
 *       rollback-only, and the handler then fails with an {@code R2dbcRollbackException} even
 *       when it swallowed the method's error (the application's COMMIT fails the same way), so
 *       the message is rolled back and treated as its own fault (retried, then dead-lettered),
 *       as in the application;
 *       {@code REQUIRES_NEW} methods take a connection of their own, as in the application;</li>
 *   <li>{@code beforeCommit} and {@code beforeCompletion} callbacks run when the handler's
 *       publisher completes, before the message's COMMIT, as in the application.</li>
 * </ul>
 *
 * <p>Not modelled: {@code afterCommit} and {@code afterCompletion} callbacks (and so
 * {@code @TransactionalEventListener}s) also run when the handler's publisher completes, before
 * the runner's COMMIT, whose outcome the join cannot see: they report a commit even for an
 * attempt the contract then rolls back. A callback that calls an outside system is then counted
 * by {@link HandlerContract.Builder#sideEffects} as a call from a rolled-back attempt, which it
 * can be in the application too (the callback runs after COMMIT, before the acknowledgement; a
 * crash in between loses it). The application's {@code ReactiveTransactionManager} bean and its
 * transaction listeners take no part in the message's transaction, as under the starter's
 * runner.
 *
 * <p>Stateless and thread-safe.
 */
public final class SpringHandlerContracts {

  private SpringHandlerContracts() {}

  /**
   * Starts a contract for a per-message handler, each instance {@linkplain #joined joined} to the
   * message's transaction, on {@code connectionFactory} (already given to
   * {@link HandlerContract.Builder#postgres(ConnectionFactory)}; the contract uses a pool as it
   * is). Required next, as for {@link HandlerContract#forHandler}: {@code reset}, {@code probe}
   * and the messages.
   *
   * @param name a name for reports
   * @param handlers makes a new instance of the application's handler; called for every consumer
   *     the contract starts
   * @param connectionFactory the application's {@code ConnectionFactory} bean, the one its
   *     repositories use
   * @param <T> the payload type
   * @return the contract's builder
   */
  public static <T> HandlerContract.Builder<T> forHandler(String name, Supplier<? extends Handler<T>> handlers,
      ConnectionFactory connectionFactory) {
    Objects.requireNonNull(handlers, "handlers");
    Objects.requireNonNull(connectionFactory, "connectionFactory");
    return HandlerContract.<T>forHandler(name, () -> joined(handlers.get(), connectionFactory))
        .postgres(connectionFactory);
  }

  /**
   * Starts a contract for a batch handler, each instance {@linkplain #joinedBatch joined} to the
   * batch's transaction, on {@code connectionFactory} (already given to
   * {@link HandlerContract.Builder#postgres(ConnectionFactory)}). Required next, as for
   * {@link HandlerContract#forBatchHandler}: {@code reset}, {@code probe} and the messages.
   *
   * @param name a name for reports
   * @param handlers makes a new instance of the application's batch handler; called for every
   *     consumer the contract starts
   * @param connectionFactory the application's {@code ConnectionFactory} bean, the one its
   *     repositories use
   * @param <T> the payload type
   * @return the contract's builder
   */
  public static <T> HandlerContract.Builder<T> forBatchHandler(String name,
      Supplier<? extends BatchHandler<T>> handlers, ConnectionFactory connectionFactory) {
    Objects.requireNonNull(handlers, "handlers");
    Objects.requireNonNull(connectionFactory, "connectionFactory");
    return HandlerContract.<T>forBatchHandler(name, () -> joinedBatch(handlers.get(), connectionFactory))
        .postgres(connectionFactory);
  }

  /**
   * The handler, run in a Spring transaction on the message's {@code tx.connection()}, with the
   * guarantees and limits described on this class. For a contract built by hand, or for a
   * pipeline of plain R2DBC transactions in a test.
   *
   * @param handler the application's handler
   * @param connectionFactory the application's {@code ConnectionFactory} bean, the one its
   *     repositories use
   * @param <T> the payload type
   * @return the joined handler
   */
  public static <T> Handler<T> joined(Handler<T> handler, ConnectionFactory connectionFactory) {
    Objects.requireNonNull(handler, "handler");
    Objects.requireNonNull(connectionFactory, "connectionFactory");
    return (payload, tx) -> inSpringTransaction(connectionFactory, tx.connection(), () -> handler.handle(payload, tx));
  }

  /**
   * The batch handler, run in a Spring transaction on the batch's {@code tx.connection()}, with
   * the guarantees and limits described on this class.
   *
   * @param handler the application's batch handler
   * @param connectionFactory the application's {@code ConnectionFactory} bean, the one its
   *     repositories use
   * @param <T> the payload type
   * @return the joined batch handler
   */
  public static <T> BatchHandler<T> joinedBatch(BatchHandler<T> handler, ConnectionFactory connectionFactory) {
    Objects.requireNonNull(handler, "handler");
    Objects.requireNonNull(connectionFactory, "connectionFactory");
    return (items, tx) -> inSpringTransaction(connectionFactory, tx.connection(), () -> handler.handle(items, tx));
  }

  private static Flux<Object> inSpringTransaction(ConnectionFactory connectionFactory, Connection connection,
      Supplier<Publisher<?>> work) {
    TransactionalOperator operator = TransactionalOperator.create(new MessageTransactionManager(connectionFactory, connection));
    return operator.execute(status -> Flux.<Object>from(work.get()));
  }
}
