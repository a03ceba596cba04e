package dev.idem.spring;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.spring.internal.IdemTransactionManager;
import dev.idem.spring.internal.TransactionAttempt;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.R2dbcRollbackException;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import org.springframework.r2dbc.connection.ConnectionFactoryUtils;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A {@link TransactionRunner} on Spring's reactive transaction management: each message's
 * transaction is a {@link TransactionalOperator} transaction of an {@code R2dbcTransactionManager}
 * on the application's {@link ConnectionFactory}, and the work gets the transaction's connection
 * from {@link ConnectionFactoryUtils#getConnection}. So a handler that uses {@code DatabaseClient},
 * {@code R2dbcEntityTemplate}, a Spring Data R2DBC repository or a {@code @Transactional} service
 * on the same {@code ConnectionFactory} joins the message's transaction: its writes commit with
 * the dedup row, or roll back with it.
 *
 * <h2>How it honours the {@link TransactionRunner} contract</h2>
 * <ul>
 *   <li><b>After commit.</b> The value is emitted only after {@code COMMIT} completed. A
 *       transaction that Spring rolls back instead of committing (a participating
 *       {@code @Transactional} method failed and marked it rollback-only, and the handler went
 *       on) ends in an {@link R2dbcRollbackException}, never in a value: the pipeline treats it
 *       as a COMMIT that answered ROLLBACK, the message's fault.</li>
 *   <li><b>Error origins.</b> An error of the work (the dedup insert, the handler) propagates as
 *       it was, even when the rollback after it fails too (Spring would report the rollback's
 *       error instead). Errors of the transaction itself are unwrapped from Spring's exceptions
 *       to the R2DBC exception beneath: a failed BEGIN or connection acquisition arrives as its
 *       cause (not as {@code CannotCreateTransactionException}), a failed COMMIT as the driver's
 *       exception (not translated to a {@code DataAccessException}), so the pipeline classifies
 *       them exactly as with its default runner, and recognises a COMMIT that answered
 *       ROLLBACK.</li>
 *   <li><b>Server-side timeouts.</b> The {@link ServerTimeouts} are set with {@code SET LOCAL}
 *       right after BEGIN (one round trip more than the default runner, which sends them with
 *       BEGIN).</li>
 *   <li><b>Cancellation and timeouts.</b> When the pipeline cancels an attempt (its transaction
 *       timeout), the running statement is cancelled with a PostgreSQL cancel request, then the
 *       transaction is rolled back with an explicit {@code ROLLBACK} bounded by
 *       5 s per step.</li>
 *   <li><b>Connections in an unknown state are not reused.</b> When that ROLLBACK (or the one
 *       after a failure) does not complete, the physical connection is closed before Spring hands
 *       it back to the pool, which then discards it instead of lending out a connection that may
 *       still be inside the old transaction. Closing it first matters with Spring: its cleanup
 *       switches auto-commit back on, and r2dbc-postgresql COMMITs a transaction still open when
 *       that happens; on the closed connection nothing reaches the server, which rolls back.</li>
 * </ul>
 *
 * <p>What Spring cannot do here: the transaction manager is Idem's own instance (an
 * {@code R2dbcTransactionManager} subclass), not the application's
 * {@code ReactiveTransactionManager} bean, so transaction listeners or a custom manager the
 * application registered do not apply to Idem's transactions; participants join them all the
 * same, since joining goes by {@code ConnectionFactory}. A connection whose BEGIN failed is
 * released by Spring as it is (the pool validates connections when they are next acquired).
 *
 * <p>Thread-safe; one instance serves any number of transactions.
 */
public final class SpringTransactionRunner implements TransactionRunner {

  private final ConnectionFactory connectionFactory;
  private final TransactionalOperator operator;
  private final String guardsSql;

  /**
   * Creates a runner without server-side timeouts.
   *
   * @param connectionFactory the application's connection factory (pooled)
   */
  public SpringTransactionRunner(ConnectionFactory connectionFactory) {
    this(connectionFactory, ServerTimeouts.none());
  }

  /**
   * Creates a runner.
   *
   * @param connectionFactory the application's connection factory (pooled); handlers must use the
   *     same instance to join the transaction
   * @param guards server-side timeouts set at the start of every transaction
   */
  public SpringTransactionRunner(ConnectionFactory connectionFactory, ServerTimeouts guards) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
    this.operator = TransactionalOperator.create(new IdemTransactionManager(connectionFactory));
    this.guardsSql = Objects.requireNonNull(guards, "guards").setLocalSql();
  }

  @Override
  public <R> Mono<R> inTransaction(Function<Connection, Mono<R>> work) {
    return Mono.defer(() -> {
      TransactionAttempt attempt = new TransactionAttempt();
      return operator.execute(status -> ConnectionFactoryUtils.getConnection(connectionFactory)
          .flatMap(connection -> guards(connection)
              .then(Mono.defer(() -> work.apply(connection))
                  .map(Optional::of)
                  .defaultIfEmpty(Optional.empty())
                  .doOnError(attempt::workFailed))))
          .singleOrEmpty()
          .contextWrite(context -> context.put(TransactionAttempt.class, attempt))
          .doOnCancel(attempt::cancelled)
          .onErrorMap(error -> originOf(error, attempt))
          .flatMap(result -> attempt.committed()
              ? Mono.justOrEmpty(result)
              : Mono.error(new R2dbcRollbackException("The transaction was rolled back instead of committed: a participating "
                  + "transaction marked it rollback-only (for example a @Transactional method that failed inside the handler)")));
    });
  }

  private Mono<Void> guards(Connection connection) {
    if (guardsSql.isEmpty()) {
      return Mono.empty();
    }
    return Flux.from(connection.createStatement(guardsSql).execute()).concatMap(result -> result.getRowsUpdated()).then();
  }

  /** The work's own error as it was; otherwise the R2DBC error beneath Spring's wrappers. */
  private static Throwable originOf(Throwable error, TransactionAttempt attempt) {
    Throwable workError = attempt.workError();
    if (workError != null) {
      return workError;
    }
    if (error instanceof R2dbcException) {
      return error;
    }
    for (Throwable t = error.getCause(); t != null && t != t.getCause(); t = t.getCause()) {
      if (t instanceof R2dbcException) {
        return t;
      }
    }
    if (error instanceof org.springframework.transaction.CannotCreateTransactionException && error.getCause() != null) {
      return error.getCause();
    }
    return error;
  }

  @Override
  public String toString() {
    return "SpringTransactionRunner[" + connectionFactory + "]";
  }
}
