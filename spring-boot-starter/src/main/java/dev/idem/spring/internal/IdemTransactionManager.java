package dev.idem.spring.internal;

import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.R2dbcRollbackException;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.r2dbc.connection.ConnectionHolder;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.reactive.GenericReactiveTransaction;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Spring's {@link R2dbcTransactionManager} with the guarantees of Idem's default runner:
 * <ul>
 *   <li>rollback is an explicit {@code ROLLBACK} statement bounded by {@link #CLEANUP_TIMEOUT}
 *       (the driver skips {@code rollbackTransaction()} when its possibly stale view of the
 *       transaction status says idle), preceded by a cancel request when the transaction was
 *       cancelled; a failed rollback is logged and leaves the state unknown;</li>
 *   <li>a connection whose state is unknown at cleanup has its physical connection closed before
 *       Spring's own cleanup, which switches auto-commit back on (r2dbc-postgresql COMMITs a
 *       transaction still open when it does) and releases the connection to the pool; errors of
 *       that cleanup on the closed connection are ignored;</li>
 *   <li>a transaction marked rollback-only by a participant fails at commit with an
 *       {@link R2dbcRollbackException};</li>
 *   <li>commit and rollback errors are not translated, so the runner sees the driver's.</li>
 * </ul>
 * The state of each transaction is the {@link TransactionAttempt} in the Reactor context.
 */
public final class IdemTransactionManager extends R2dbcTransactionManager {

  /** Longest wait for each cleanup step (cancel request, rollback, close): 5 s. */
  public static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(5);

  private static final long serialVersionUID = 1L;
  private static final Logger log = LoggerFactory.getLogger(IdemTransactionManager.class);

  /** The key under which a transaction's attempt is bound to its synchronization manager. */
  private final transient Object attemptKey = new Object();

  /**
   * Creates the manager.
   *
   * @param connectionFactory the application's connection factory
   */
  public IdemTransactionManager(ConnectionFactory connectionFactory) {
    super(connectionFactory);
  }

  @Override
  protected Mono<Void> doBegin(TransactionSynchronizationManager synchronizationManager, Object transaction,
      TransactionDefinition definition) {
    return Mono.deferContextual(context -> super.doBegin(synchronizationManager, transaction, definition)
        .then(Mono.fromRunnable(() -> {
          TransactionAttempt attempt = context.<TransactionAttempt>getOrEmpty(TransactionAttempt.class)
              .orElseGet(TransactionAttempt::new);
          ConnectionHolder holder = (ConnectionHolder) Objects.requireNonNull(
              synchronizationManager.getResource(obtainConnectionFactory()), "bound by super.doBegin");
          attempt.begun(holder.getConnection());
          synchronizationManager.bindResource(attemptKey, attempt);
        })));
  }

  @Override
  protected Mono<Void> doCommit(TransactionSynchronizationManager synchronizationManager, GenericReactiveTransaction status) {
    return Mono.defer(() -> {
      TransactionAttempt attempt = attempt(synchronizationManager);
      ConnectionHolder holder = (ConnectionHolder) synchronizationManager.getResource(obtainConnectionFactory());
      if (holder != null && holder.isRollbackOnly()) {
        return Mono.error(new R2dbcRollbackException("The transaction was marked rollback-only by a participating transaction "
            + "(for example a @Transactional method that failed inside the handler); it is rolled back, not committed"));
      }
      if (attempt != null) {
        attempt.committing();
      }
      return super.doCommit(synchronizationManager, status).doOnSuccess(ignored -> {
        if (attempt != null) {
          attempt.committedCleanly();
        }
      });
    });
  }

  @Override
  protected Mono<Void> doRollback(TransactionSynchronizationManager synchronizationManager, GenericReactiveTransaction status) {
    return Mono.defer(() -> {
      TransactionAttempt attempt = attempt(synchronizationManager);
      Connection connection = attempt != null ? attempt.connection() : null;
      if (attempt == null || connection == null) {
        return super.doRollback(synchronizationManager, status);
      }
      // Never a cancel request once COMMIT was sent: it would end a wait for synchronous replication with the
      // transaction committed on the primary alone (R2dbcTransactionRunner does the same).
      Mono<Void> cancel = attempt.isCancelled() && !attempt.isCommitting() ? cancelRunningStatement(connection) : Mono.empty();
      return cancel.then(Flux.from(connection.createStatement("ROLLBACK").execute())
          .concatMap(result -> result.getRowsUpdated())
          .then())
          .timeout(CLEANUP_TIMEOUT)
          .doOnSuccess(ignored -> attempt.rolledBack())
          .onErrorResume(e -> {
            log.debug("Rollback of a transaction failed: {}", e.toString());
            return Mono.empty();
          });
    });
  }

  @Override
  protected Mono<Void> doCleanupAfterCompletion(TransactionSynchronizationManager synchronizationManager, Object transaction) {
    return Mono.defer(() -> {
      TransactionAttempt attempt = attempt(synchronizationManager);
      if (attempt != null) {
        synchronizationManager.unbindResource(attemptKey);
      }
      if (attempt != null && !attempt.isClean() && attempt.connection() != null) {
        return discard(attempt.connection()).then(super.doCleanupAfterCompletion(synchronizationManager, transaction)
            .onErrorResume(e -> {
              log.debug("Ignoring the failed cleanup of a discarded connection: {}", e.toString());
              return Mono.empty();
            }));
      }
      return super.doCleanupAfterCompletion(synchronizationManager, transaction);
    });
  }

  @Override
  protected RuntimeException translateException(String task, R2dbcException ex) {
    return ex;
  }

  private @Nullable TransactionAttempt attempt(TransactionSynchronizationManager synchronizationManager) {
    return synchronizationManager.hasResource(attemptKey)
        ? (TransactionAttempt) synchronizationManager.getResource(attemptKey)
        : null;
  }

  private static Mono<Void> cancelRunningStatement(Connection connection) {
    return physical(connection) instanceof PostgresqlConnection postgres
        ? quietly(postgres.cancelRequest(), "cancel request")
        : Mono.empty();
  }

  private static Mono<Void> discard(Connection connection) {
    log.warn("A database connection's transaction state is unknown (its rollback did not complete); "
        + "closing it so that the pool never lends it out again");
    Connection physical = physical(connection);
    return physical == connection ? Mono.empty() : quietly(physical.close(), "close of the physical connection");
  }

  private static Connection physical(Connection connection) {
    Connection c = connection;
    while (c instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof Connection inner && inner != c) {
      c = inner;
    }
    return c;
  }

  private static Mono<Void> quietly(Publisher<Void> action, String what) {
    return Mono.from(action).timeout(CLEANUP_TIMEOUT).onErrorResume(e -> {
      log.debug("Ignoring a failed {} of a transaction's connection: {}", what, e.toString());
      return Mono.empty();
    });
  }
}
