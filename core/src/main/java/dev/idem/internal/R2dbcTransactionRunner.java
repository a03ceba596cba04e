package dev.idem.internal;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.ValidationDepth;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The default {@link TransactionRunner} on plain R2DBC: one connection from the factory (pooled
 * when it is an r2dbc-pool {@code ConnectionPool}) per transaction.
 *
 * <p>A runner may keep up to {@code keepIdle} connections between transactions instead of
 * handing each back to the pool after its COMMIT: the next transaction takes one of them
 * without a round trip through the pool (its acquisition, timeout, validation and release cost
 * more CPU than the transaction's own statements). Only a connection whose transaction state is
 * known to be clean is kept. A kept connection goes back to the pool when it has not been used
 * for {@link #IDLE_RETURN}, when the pool has callers waiting, or at the end of a transaction
 * once it has been away from the pool for {@link #MAX_KEEP} (so the pool applies its lifetime
 * and validation rules to it); a kept connection that says it is no longer connected is handed
 * back, not used.
 *
 * <p>{@code BEGIN} and the {@link ServerTimeouts} ({@code SET LOCAL ...}) go to the server in one
 * round trip; the value is emitted only after {@code COMMIT} returned.
 *
 * <p>A connection goes back to the pool only when its transaction state is known to be clean:
 * after a {@code COMMIT} or an explicit {@code ROLLBACK} that completed. On error the transaction
 * is rolled back; on cancellation (which includes the pipeline's transaction timeout) the running
 * statement is first cancelled with a PostgreSQL cancel request, then rolled back, except once
 * COMMIT was sent: a COMMIT is never cancelled (a cancelled wait for synchronous replication
 * leaves the transaction committed on the primary alone). When the
 * rollback does not complete within {@link #CLEANUP_TIMEOUT}, the physical connection is closed
 * before it is handed back, so the pool discards it on its next validation instead of lending
 * out a connection that may still be inside the old transaction. A connection whose transaction
 * ended with an error that leaves it unusable ({@link ConnectionFaults}: lost, its server shutting
 * down, or read-only after a failover demoted it) is closed the same way, without a rollback, so
 * that after a primary switch the pool opens new connections, which find the new primary.
 */
public final class R2dbcTransactionRunner implements TransactionRunner {

  /** Longest wait for each cleanup step (cancel request, rollback, close): 5 s. */
  public static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(5);

  /** How long a kept connection may wait for the next transaction before it goes back to the pool: 1 s. */
  public static final Duration IDLE_RETURN = Duration.ofSeconds(1);
  /** How long a connection may stay away from its pool before it goes back after a transaction: 30 s. */
  public static final Duration MAX_KEEP = Duration.ofSeconds(30);

  private static final Logger log = LoggerFactory.getLogger(R2dbcTransactionRunner.class);

  private final ConnectionFactory connectionFactory;
  private final String beginSql;
  private final String pipelinedBeginSql;
  private final int keepIdle;
  /** Kept connections, the most recently used first. */
  private final ConcurrentLinkedDeque<Kept> kept = new ConcurrentLinkedDeque<>();
  private final AtomicInteger keptCount = new AtomicInteger();
  private final AtomicBoolean sweeping = new AtomicBoolean();

  /** A connection kept between transactions: when it left the pool, and since when it waits. */
  private record Kept(Connection connection, long acquiredAt, long idleSince) {}

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
    this(connectionFactory, guards, 0);
  }

  /**
   * Creates a runner that keeps connections between transactions.
   *
   * @param connectionFactory where connections come from; should be pooled
   * @param guards server-side timeouts set at the start of every transaction
   * @param keepIdle how many clean connections to keep between transactions; 0 hands each back at once
   */
  public R2dbcTransactionRunner(ConnectionFactory connectionFactory, ServerTimeouts guards, int keepIdle) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
    this.beginSql = "BEGIN;" + Objects.requireNonNull(guards, "guards").setLocalSql();
    this.pipelinedBeginSql = beginSql + "SET LOCAL " + PostgresInbox.IN_TRANSACTION_SETTING + " = 'on';";
    if (keepIdle < 0) {
      throw new IllegalArgumentException("keepIdle must not be negative, was " + keepIdle);
    }
    this.keepIdle = keepIdle;
  }

  @Override
  public <R> Mono<R> inTransaction(Function<Connection, Mono<R>> work) {
    return Mono.usingWhen(
        acquire(),
        attempt -> attempt.run(work),
        Attempt::release,
        (attempt, error) -> attempt.release(),
        Attempt::abandon);
  }

  /**
   * Runs {@code first} and then {@code rest} in a new transaction, with {@code first}'s statement
   * sent right behind {@code BEGIN}, before BEGIN's answer arrived: one round trip for both. The
   * value is emitted only after COMMIT returned, as with {@link #inTransaction(Function)}.
   *
   * <p>Should BEGIN fail without starting the transaction (its query string is parsed as a
   * whole, so an error can stop it before BEGIN ran), the server would run {@code first}'s
   * statement on its own and commit it at once. So {@code first} must run only statements that
   * fail outside this transaction: the pipelined BEGIN sets the transaction-local
   * {@value PostgresInbox#IN_TRANSACTION_SETTING} to {@code on}, and such a statement checks it
   * ({@code current_setting('idem.in_transaction', true) = 'on'}), as
   * {@link PostgresInbox#recordPipelined} does. BEGIN's error arrives first and
   * is the one reported.
   *
   * @param first the statement to send with BEGIN; it must check the setting
   * @param rest the rest of the work, given {@code first}'s value
   * @param <F> the type of {@code first}'s value
   * @param <R> the result type
   * @return the result, emitted after commit
   */
  public <F, R> Mono<R> inTransaction(Function<Connection, Mono<F>> first, BiFunction<Connection, F, Mono<R>> rest) {
    return Mono.usingWhen(
        acquire(),
        attempt -> attempt.run(first, rest),
        Attempt::release,
        (attempt, error) -> attempt.release(),
        Attempt::abandon);
  }

  /** A kept connection that still says it is connected, else one from the factory. */
  private Mono<Attempt> acquire() {
    return Mono.defer(() -> {
      Kept k = takeKept();
      if (k == null) {
        return Mono.from(connectionFactory.create()).map(connection -> new Attempt(connection, System.nanoTime()));
      }
      return Mono.from(k.connection().validate(ValidationDepth.LOCAL))
          .onErrorReturn(false)
          .defaultIfEmpty(false)
          .flatMap(connected -> connected
              ? Mono.just(new Attempt(k.connection(), k.acquiredAt()))
              : quietly(k.connection().close(), "release of a disconnected kept connection").then(acquire()));
    });
  }

  private Kept takeKept() {
    Kept k = kept.pollFirst();
    if (k != null) {
      keptCount.decrementAndGet();
    }
    return k;
  }

  /** Keeps a clean connection for the next transaction when there is room and nobody waits for the pool. */
  private boolean keep(Connection connection, long acquiredAt) {
    long now = System.nanoTime();
    if (keepIdle == 0 || now - acquiredAt >= MAX_KEEP.toNanos() || poolHasWaiters()) {
      return false;
    }
    if (keptCount.incrementAndGet() > keepIdle) {
      keptCount.decrementAndGet();
      return false;
    }
    Kept entry = new Kept(connection, acquiredAt, now);
    kept.addFirst(entry);
    if (sweeping.compareAndSet(false, true) && !scheduleSweep(IDLE_RETURN.toMillis())) {
      // No scheduler to hand connections back later (it was shut down): keep nothing.
      boolean mine = kept.removeFirstOccurrence(entry);
      if (mine) {
        keptCount.decrementAndGet();
      }
      sweep(Long.MAX_VALUE);
      return !mine;
    }
    return true;
  }

  private boolean scheduleSweep(long delayMillis) {
    try {
      Schedulers.parallel().schedule(() -> sweep(IDLE_RETURN.toNanos()), delayMillis, TimeUnit.MILLISECONDS);
      return true;
    } catch (java.util.concurrent.RejectedExecutionException e) {
      sweeping.set(false);
      return false;
    }
  }

  private boolean poolHasWaiters() {
    return connectionFactory instanceof ConnectionPool pool
        && pool.getMetrics().map(metrics -> metrics.pendingAcquireSize() > 0).orElse(false);
  }

  /**
   * Hands back the connections kept unused for at least {@code idleNanos} ({@link #IDLE_RETURN}
   * when scheduled); runs again while any are kept.
   */
  private void sweep(long idleNanos) {
    long now = System.nanoTime();
    for (Kept k : kept) {
      if ((idleNanos == Long.MAX_VALUE || now - k.idleSince() >= idleNanos) && kept.removeFirstOccurrence(k)) {
        keptCount.decrementAndGet();
        quietly(k.connection().close(), "release of an idle kept connection").subscribe();
      }
    }
    sweeping.set(false);
    if (idleNanos != Long.MAX_VALUE && !kept.isEmpty() && sweeping.compareAndSet(false, true)
        && !scheduleSweep(IDLE_RETURN.toMillis() / 2)) {
      sweep(Long.MAX_VALUE);
    }
  }

  /** One connection's transaction and what is known about its state. */
  private final class Attempt {
    private final Connection connection;
    private final long acquiredAt;
    /** False from BEGIN until a COMMIT or ROLLBACK completed. */
    private volatile boolean clean = true;
    /** Set when COMMIT is sent: from then on the transaction is never cancelled (see {@link #abandon()}). */
    private volatile boolean committing;
    /** Set when an error said the connection cannot run another transaction (see {@link ConnectionFaults}). */
    private volatile boolean unusable;

    Attempt(Connection connection, long acquiredAt) {
      this.connection = connection;
      this.acquiredAt = acquiredAt;
    }

    <R> Mono<R> run(Function<Connection, Mono<R>> work) {
      return committed(Mono.defer(() -> {
        clean = false;
        return execute(beginSql);
      }).then(Mono.defer(() -> work.apply(connection))));
    }

    /** BEGIN and {@code first} sent together, then {@code rest} after {@code first}'s answer. */
    <F, R> Mono<R> run(Function<Connection, Mono<F>> first, BiFunction<Connection, F, Mono<R>> rest) {
      return committed(Mono.defer(() -> {
        clean = false;
        // zip subscribes in order: BEGIN's query is queued on the connection before first's statement.
        return Mono.zip(execute(pipelinedBeginSql).thenReturn(Boolean.TRUE), Mono.defer(() -> first.apply(connection)),
            (begun, f) -> f);
      }).flatMap(f -> rest.apply(connection, f)));
    }

    /** COMMIT after {@code body}, its value emitted only after COMMIT returned; ROLLBACK after an error. */
    private <R> Mono<R> committed(Mono<R> body) {
      return body
          .map(Optional::of)
          .defaultIfEmpty(Optional.empty())
          .flatMap(result -> Mono.defer(() -> {
            committing = true;
            return Mono.from(connection.commitTransaction());
          })
              .doOnSuccess(ignored -> clean = true)
              .then(Mono.justOrEmpty(result)))
          .onErrorResume(error -> {
            if (ConnectionFaults.unusable(error)) {
              // Closing it ends the transaction on the server; a ROLLBACK could wait on a dead peer.
              unusable = true;
              return Mono.error(error);
            }
            return rollback().then(Mono.error(error));
          });
    }

    /** After completion or error: keep the connection or hand it back, or discard it when its state is unknown. */
    Mono<Void> release() {
      if (unusable) {
        log.debug("Closing a database connection that cannot run another transaction (lost, or its server is "
            + "shutting down or read-only after a failover)");
        return close();
      }
      if (!clean) {
        log.warn("A database connection's transaction state is unknown (its rollback did not complete); "
            + "closing it so that the pool never lends it out again");
        return close();
      }
      return keep(connection, acquiredAt) ? Mono.empty() : quietly(connection.close(), "release");
    }

    /**
     * After cancellation: stop the running statement, roll back, then release. Once COMMIT was
     * sent, nothing is cancelled: a cancel request that reaches a COMMIT waiting for synchronous
     * replication ends the wait with the transaction committed on the primary alone, visible
     * there and acknowledged by the retry as a duplicate while no standby has it. The ROLLBACK
     * then queues behind the COMMIT on the connection, so the connection goes back only after
     * COMMIT's answer, or is closed after {@link #CLEANUP_TIMEOUT}, which leaves the server's
     * wait to end by itself.
     */
    Mono<Void> abandon() {
      Mono<Void> stop = committing ? Mono.empty() : cancelRunningStatement();
      return stop.then(rollback()).then(Mono.defer(this::release));
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

    /** Closes the physical connection, then hands the pooled wrapper back: the pool drops it on validation. */
    private Mono<Void> close() {
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
