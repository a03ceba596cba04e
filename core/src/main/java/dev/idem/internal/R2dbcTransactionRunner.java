package dev.idem.internal;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The default {@link TransactionRunner} on plain R2DBC: one connection from the factory (pooled
 * when it is an r2dbc-pool {@code ConnectionPool}) per transaction.
 *
 * <p>{@code BEGIN} and the {@link ServerTimeouts} ({@code SET LOCAL ...}) go to the server in one
 * round trip; the value is emitted only after {@code COMMIT} returned.
 *
 * <p>A connection goes back to the pool only when its transaction state is known to be clean:
 * after a {@code COMMIT} or an explicit {@code ROLLBACK} that completed. On error the transaction
 * is rolled back; on cancellation (which includes the pipeline's transaction timeout) the running
 * statement is first cancelled with a PostgreSQL cancel request, then rolled back. When the
 * rollback does not complete within {@link #CLEANUP_TIMEOUT}, the physical connection is closed
 * before it is handed back, so the pool discards it on its next validation instead of lending
 * out a connection that may still be inside the old transaction.
 */
public final class R2dbcTransactionRunner implements TransactionRunner {

  /** Longest wait for each cleanup step (cancel request, rollback, close): 5 s. */
  public static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(5);

  private static final Logger log = LoggerFactory.getLogger(R2dbcTransactionRunner.class);

  private final ConnectionFactory connectionFactory;
  private final String beginSql;

  /**
   * Creates a runner without server-side guards.
   *
   * @param connectionFactory where connections come from; should be pooled
   */
  public R2dbcTransactionRunner(ConnectionFactory connectionFactory) {
    this(connectionFactory, ServerTimeouts.none());
  }

  /**
   * Creates a runner.
   *
   * @param connectionFactory where connections come from; should be pooled
   * @param guards server-side timeouts set at the start of every transaction
   */
  public R2dbcTransactionRunner(ConnectionFactory connectionFactory, ServerTimeouts guards) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
    this.beginSql = "BEGIN;" + Objects.requireNonNull(guards, "guards").setLocalSql();
  }

  @Override
  public <R> Mono<R> inTransaction(Function<Connection, Mono<R>> work) {
    return Mono.usingWhen(
        Mono.from(connectionFactory.create()).map(Attempt::new),
        attempt -> attempt.run(work),
        Attempt::release,
        (attempt, error) -> attempt.release(),
        Attempt::abandon);
  }

  /** One connection's transaction and what is known about its state. */
  private final class Attempt {
    private final Connection connection;
    /** False from BEGIN until a COMMIT or ROLLBACK completed. */
    private volatile boolean clean = true;

    Attempt(Connection connection) {
      this.connection = connection;
    }

    <R> Mono<R> run(Function<Connection, Mono<R>> work) {
      return Mono.defer(() -> {
        clean = false;
        return execute(beginSql);
      })
          .then(Mono.defer(() -> work.apply(connection)))
          .map(Optional::of)
          .defaultIfEmpty(Optional.empty())
          .flatMap(result -> Mono.from(connection.commitTransaction())
              .doOnSuccess(ignored -> clean = true)
              .then(Mono.justOrEmpty(result)))
          .onErrorResume(error -> rollback().then(Mono.error(error)));
    }

    /** After completion or error: hand the connection back, or discard it when its state is unknown. */
    Mono<Void> release() {
      return clean ? quietly(connection.close(), "release") : discard();
    }

    /** After cancellation: stop the running statement, roll back, then release. */
    Mono<Void> abandon() {
      return cancelRunningStatement().then(rollback()).then(Mono.defer(this::release));
    }

    /**
     * An explicit ROLLBACK statement, not {@code rollbackTransaction()}: the driver skips the
     * latter when its (possibly stale) view of the transaction status says idle.
     */
    private Mono<Void> rollback() {
      return execute("ROLLBACK")
          .timeout(CLEANUP_TIMEOUT)
          .doOnSuccess(ignored -> clean = true)
          .onErrorResume(e -> {
            log.debug("Rollback of a transaction failed: {}", e.toString());
            return Mono.empty();
          });
    }

    private Mono<Void> cancelRunningStatement() {
      return physical() instanceof PostgresqlConnection postgres
          ? quietly(postgres.cancelRequest(), "cancel request")
          : Mono.empty();
    }

    private Mono<Void> discard() {
      log.warn("A database connection's transaction state is unknown (its rollback did not complete); "
          + "closing it so that the pool never lends it out again");
      Connection physical = physical();
      Mono<Void> closePhysical = quietly(physical.close(), "close of the physical connection");
      return physical == connection ? closePhysical : closePhysical.then(quietly(connection.close(), "release"));
    }

    private Connection physical() {
      Connection c = connection;
      while (c instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof Connection inner && inner != c) {
        c = inner;
      }
      return c;
    }

    private Mono<Void> execute(String sql) {
      return Flux.from(connection.createStatement(sql).execute())
          .concatMap(Result::getRowsUpdated)
          .then();
    }
  }

  private static Mono<Void> quietly(Publisher<Void> action, String what) {
    return Mono.from(action).timeout(CLEANUP_TIMEOUT).onErrorResume(e -> {
      log.debug("Ignoring a failed {} of a transaction's connection: {}", what, e.toString());
      return Mono.empty();
    });
  }
}
