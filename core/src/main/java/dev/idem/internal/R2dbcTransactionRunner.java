package dev.idem.internal;

import dev.idem.TransactionRunner;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * The default {@link TransactionRunner} on plain R2DBC: one connection from the factory (pooled
 * when it is an r2dbc-pool {@code ConnectionPool}) per transaction, explicit
 * {@code beginTransaction}/{@code commitTransaction}/{@code rollbackTransaction}.
 *
 * <p>The value is emitted only after {@code COMMIT} returned. On error the transaction is rolled
 * back and the original error propagates (a failing rollback is logged, not thrown, since the
 * connection is closed anyway and PostgreSQL discards an unfinished transaction). On
 * cancellation the transaction is rolled back before the connection is released; each cleanup
 * step gets {@link #CLEANUP_TIMEOUT}, so a hung connection is still closed and released.
 */
public final class R2dbcTransactionRunner implements TransactionRunner {

  /** Longest wait for a rollback or close during cleanup: 5 s. */
  public static final java.time.Duration CLEANUP_TIMEOUT = java.time.Duration.ofSeconds(5);

  private static final Logger log = LoggerFactory.getLogger(R2dbcTransactionRunner.class);

  private final ConnectionFactory connectionFactory;

  /**
   * Creates a runner.
   *
   * @param connectionFactory where connections come from; should be pooled
   */
  public R2dbcTransactionRunner(ConnectionFactory connectionFactory) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
  }

  @Override
  public <R> Mono<R> inTransaction(Function<Connection, Mono<R>> work) {
    return Mono.usingWhen(
        connectionFactory.create(),
        connection -> transaction(connection, work),
        connection -> quietly(connection.close(), "close"),
        (connection, error) -> quietly(connection.close(), "close"),
        connection -> quietly(connection.rollbackTransaction(), "rollback after cancel")
            .then(quietly(connection.close(), "close")));
  }

  private static <R> Mono<R> transaction(Connection connection, Function<Connection, Mono<R>> work) {
    return Mono.from(connection.beginTransaction())
        .then(Mono.defer(() -> work.apply(connection)))
        .map(Optional::of)
        .defaultIfEmpty(Optional.empty())
        .flatMap(result -> Mono.from(connection.commitTransaction()).then(Mono.justOrEmpty(result)))
        .onErrorResume(error -> quietly(connection.rollbackTransaction(), "rollback").then(Mono.error(error)));
  }

  private static Mono<Void> quietly(Publisher<Void> action, String what) {
    return Mono.from(action).timeout(CLEANUP_TIMEOUT).onErrorResume(e -> {
      log.debug("Ignoring failed {} of a transaction's connection: {}", what, e.toString());
      return Mono.empty();
    });
  }
}
