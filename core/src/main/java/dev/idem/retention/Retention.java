package dev.idem.retention;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.RetryWarnings;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.postgres.PostgresInbox;
import dev.idem.postgres.RotatingLayout;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Removes processed ids (and sent outbox rows) older than a window, on a schedule, in bounded
 * steps, while the consumer runs.
 *
 * <pre>{@code
 * Retention retention = Retention.builder()
 *     .inbox(inbox, Duration.ofDays(14))
 *     .outbox(outbox, Duration.ofDays(2))
 *     .checkedAgainst(KafkaRedeliveryHorizon.of(bootstrapServers, "payments"))
 *     .build();
 * source.receive().transform(payments::process).transform(retention::alongside).subscribe();
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Never younger than the window.</b> A row is removed only when its time
 *       ({@code processed_at}, the start of the transaction that recorded the id; {@code sent_at}
 *       for outbox rows) is older than the window by the database's clock. Pending and parked
 *       outbox rows are never removed.</li>
 *   <li><b>Bounded steps.</b> The plain inbox and the outbox are cleaned by {@code DELETE}s of at
 *       most {@code batchSize} rows, each its own short transaction with a
 *       {@code lock_timeout} and a {@code statement_timeout}, with {@code batchPause} between
 *       them; no single long {@code DELETE}. A rotating inbox
 *       ({@link PostgresInbox#rotating}) is cleaned in O(1): a slot whose newest possible id is
 *       older than the window is emptied with {@code TRUNCATE}, which waits at most
 *       {@code lockTimeout} for its lock and gives up otherwise (tried again next run); while it
 *       waits, new transactions of the consumer wait behind it, so {@code lockTimeout} bounds the
 *       pause it can cause. A slot whose lock is granted only after its next period began (a slow
 *       run) is not emptied, since new ids may already be in it; its old ids stay one more cycle.</li>
 *   <li><b>Refused when too short.</b> With {@link Builder#checkedAgainst}, the window of each
 *       inbox is compared with the broker's redelivery horizon when retention starts; a shorter
 *       window (or a broker that keeps messages forever) fails the start with a
 *       {@link RetentionWindowException} naming both numbers, where the horizon was read and
 *       the shortest window accepted, unless
 *       {@link Builder#allowWindowShorterThanBroker} overrides it.</li>
 *   <li><b>Runs by itself.</b> {@link #alongside} runs a cleanup at once and then each
 *       {@code interval} after the previous run ended, for as long as the consumer's stream is
 *       subscribed. A failing run (database down) is logged at WARN
 *       when failures start and every 10 minutes while they last, and retried at the next
 *       interval; it never ends the stream: the window only grows meanwhile.</li>
 * </ul>
 *
 * <p>Defaults: interval 1 min, batches of {@value #DEFAULT_BATCH_SIZE} rows, 10 ms between
 * batches, lock timeout 200 ms, statement timeout 10 s. Immutable and thread-safe.
 */
public final class Retention {

  /** Default time between cleanup runs: 1 min. */
  public static final Duration DEFAULT_INTERVAL = Duration.ofMinutes(1);
  /** Default rows per {@code DELETE}: {@value}. */
  public static final int DEFAULT_BATCH_SIZE = 1_000;
  /** Default pause between two batches: 10 ms. */
  public static final Duration DEFAULT_BATCH_PAUSE = Duration.ofMillis(10);
  /** Default longest wait of a cleanup statement for a lock: 200 ms. */
  public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofMillis(200);
  /** Default longest cleanup statement: 10 s. */
  public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(10);
  /** Batches per table and run at most: {@value}; the rest waits for the next run. */
  public static final int MAX_BATCHES_PER_RUN = 10_000;

  private static final Logger log = LoggerFactory.getLogger(Retention.class);
  private static final String LOCK_NOT_AVAILABLE = "55P03";

  private final List<Target> targets;
  private final List<RedeliveryHorizon> horizons;
  private final boolean allowShorter;
  private final Duration interval;
  private final int batchSize;
  private final Duration batchPause;
  private final Duration lockTimeout;
  private final Duration statementTimeout;
  private final RetentionMetrics metrics;

  private Retention(Builder b) {
    this.targets = List.copyOf(b.targets);
    this.horizons = List.copyOf(b.horizons);
    this.allowShorter = b.allowShorter;
    this.interval = b.interval;
    this.batchSize = b.batchSize;
    this.batchPause = b.batchPause;
    this.lockTimeout = b.lockTimeout;
    this.statementTimeout = b.statementTimeout;
    this.metrics = b.metrics;
  }

  /**
   * Starts a builder.
   *
   * @return a builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Runs {@code stream} with cleanups every {@code interval} for as long as it is subscribed:
   * first the checks, each rotating inbox's layout row ({@link PostgresInbox#verifyLayout()}) and
   * then the windows ({@link #verifyWindow()}), a refusal failing the returned stream before
   * {@code stream} is subscribed; then {@code stream} and the cleanup schedule side by side.
   * Cancelling the returned stream stops both.
   *
   * @param stream the consumer's (or relay's) stream
   * @param <T> its element type
   * @return {@code stream}'s elements
   */
  public <T> Flux<T> alongside(Publisher<T> stream) {
    return verifyAtStart().thenMany(Flux.merge(Flux.from(stream), schedule().then(Mono.<T>empty())));
  }

  /**
   * Compares each inbox window with each configured broker horizon.
   *
   * @return completes when every window is long enough (or the override is set); errors with a
   *     {@link RetentionWindowException} otherwise, or with the broker's error when a horizon
   *     cannot be read
   */
  public Mono<Void> verifyWindow() {
    return Flux.fromIterable(horizons)
        .concatMap(horizon -> Mono.defer(horizon::horizon))
        .concatMap(horizon -> Flux.fromIterable(targets).filter(t -> t.checkedAgainstBroker)
            .concatMap(target -> check(target, horizon)))
        .then();
  }

  /**
   * What {@link #run()} and {@link #alongside} check before the first cleanup: each rotating
   * inbox's layout row against its configuration ({@link PostgresInbox#verifyLayout()}), then the
   * windows against the brokers ({@link #verifyWindow()}).
   */
  private Mono<Void> verifyAtStart() {
    return Flux.fromIterable(targets).filter(t -> t.rotating != null)
        .concatMap(t -> Objects.requireNonNull(t.inbox).verifyLayout()).then(verifyWindow());
  }

  private Mono<Void> check(Target target, RedeliveryHorizon.Horizon horizon) {
    String problem = switch (horizon.kind()) {
      case BOUNDED -> target.window.compareTo(horizon.duration()) < 0
          ? "is shorter than the broker can redeliver: " + horizon.source() + " = " + horizon.duration()
              + "; the window must be at least " + horizon.duration()
          : null;
      case UNBOUNDED -> "cannot cover the broker, which can redeliver at any time: " + horizon.source();
      case UNKNOWN -> {
        log.warn("Retention of {}: the broker sets no readable redelivery bound ({}); make sure the window {} exceeds how long "
            + "a message can come back", target.table, horizon.source(), target.window);
        yield null;
      }
    };
    if (problem == null) {
      return Mono.empty();
    }
    String message = "Retention window " + target.window + " of " + target.table + " " + problem
        + ". An id removed while its message can still be redelivered would be applied twice. Raise the window, or set "
        + "Retention.builder().allowWindowShorterThanBroker(true) when redelivery is bounded otherwise";
    if (allowShorter) {
      log.warn("{} (overridden by allowWindowShorterThanBroker)", message);
      return Mono.empty();
    }
    return Mono.error(new RetentionWindowException(message));
  }

  /**
   * Cleanup runs forever, the first at once and each next one {@code interval} after the previous
   * ended (a fixed delay: a run that took longer than the interval is not followed by another at
   * once, so the consumer always gets the interval to itself); a failed run is logged and the next
   * one tries again.
   */
  private Flux<CleanupReport> schedule() {
    RetryWarnings warnings = new RetryWarnings(log, "Retention cleanup", Duration.ofMinutes(10));
    return Mono.defer(this::cleanupOnce)
        .doOnSuccess(report -> warnings.succeeded())
        .onErrorResume(error -> !JvmErrors.isFatal(error), error -> {
          warnings.failed(error);
          return Mono.empty();
        })
        .repeatWhen(runsEnded -> runsEnded.concatMap(ended -> Mono.delay(interval)));
  }

  /**
   * Runs the schedule without a stream of its own: verify (rotating layouts, then windows), then
   * clean every {@code interval}.
   *
   * @return one report per run; never completes
   */
  public Flux<CleanupReport> run() {
    return verifyAtStart().thenMany(schedule());
  }

  /**
   * One cleanup run over every table, now.
   *
   * @return what it did
   */
  public Mono<CleanupReport> cleanupOnce() {
    return Flux.fromIterable(targets).concatMap(this::clean).collectList().map(CleanupReport::new);
  }

  private Mono<CleanupReport.TableReport> clean(Target target) {
    return target.rotating != null ? truncateExpiredSlots(target) : deleteInBatches(target);
  }

  // ---- plain inbox and outbox: bounded DELETEs ----

  private Mono<CleanupReport.TableReport> deleteInBatches(Target target) {
    TransactionRunner transactions = transactions(target.connectionFactory);
    String deleteSql = target.outbox
        ? "DELETE FROM " + target.table + " WHERE seq = ANY(ARRAY(SELECT seq FROM " + target.table
            + " WHERE status = 'SENT' AND sent_at < now() - make_interval(secs => $1) ORDER BY sent_at LIMIT " + batchSize + "))"
        : "DELETE FROM " + target.table + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM " + target.table
            + " WHERE processed_at < now() - make_interval(secs => $1) ORDER BY processed_at LIMIT " + batchSize + "))"
            + " AND processed_at < now() - make_interval(secs => $1)";
    String oldestSql = target.outbox
        ? "SELECT extract(epoch FROM now() - min(sent_at))::float8 FROM " + target.table + " WHERE status = 'SENT'"
        : "SELECT extract(epoch FROM now() - min(processed_at))::float8 FROM " + target.table;
    double windowSeconds = target.window.toMillis() / 1000.0;
    long[] removed = new long[1];
    int[] batches = new int[1];
    long[] longest = new long[1];
    Mono<Long> batch = Mono.defer(() -> {
      long start = System.nanoTime();
      return transactions.inTransaction(c -> rowsUpdated(c.createStatement(deleteSql).bind(0, windowSeconds)))
          .doOnNext(n -> {
            long took = System.nanoTime() - start;
            removed[0] += n;
            batches[0]++;
            longest[0] = Math.max(longest[0], took);
            metrics.batch(target.table, n, Duration.ofNanos(took));
          });
    });
    return batch
        .expand(n -> n >= batchSize && batches[0] < MAX_BATCHES_PER_RUN ? Mono.delay(batchPause).then(batch) : Mono.empty())
        .then(queryDouble(target.connectionFactory, oldestSql))
        .map(oldest -> {
          Duration age = Duration.ofMillis((long) (oldest * 1000));
          metrics.oldestKept(target.table, age);
          return new CleanupReport.TableReport(target.table, removed[0], batches[0], Duration.ofNanos(longest[0]), age, 0);
        });
  }

  // ---- rotating inbox: TRUNCATE of expired slots ----

  private Mono<CleanupReport.TableReport> truncateExpiredSlots(Target target) {
    RotatingLayout layout = Objects.requireNonNull(target.rotating);
    PostgresInbox inbox = Objects.requireNonNull(target.inbox);
    TransactionRunner transactions = transactions(target.connectionFactory);
    long period = layout.period().toMillis();
    int slots = layout.slots();
    long window = target.window.toMillis();
    long margin = 2 * lockTimeout.toMillis();
    long[] removed = new long[1];
    int[] batches = new int[1];
    int[] skipped = new int[1];
    long[] longest = new long[1];
    long[] oldestStart = {Long.MAX_VALUE};
    long[] nowSeen = new long[1];
    // The slots are computed from the configured layout; the database records by its own row. Never empty a slot unless they agree.
    return inbox.verifyLayout().thenMany(Flux.range(0, slots))
        .concatMap(slot -> {
          String partition = inbox.slotPartition(slot);
          long start = System.nanoTime();
          return transactions.inTransaction(c -> queryLong(c, "SELECT (extract(epoch FROM now()) * 1000)::bigint")
              .flatMap(now -> {
                nowSeen[0] = now;
                long current = Math.floorDiv(now, period);
                long newest = current - Math.floorMod(current - slot, slots); // the newest period this slot can hold
                boolean expired = (newest + 1) * period + window <= now;
                boolean reusedSoon = (newest + slots) * period - now <= margin;
                if (newest == current || !expired || reusedSoon) {
                  return queryLong(c, "SELECT count(*) FROM (SELECT 1 FROM " + partition + " LIMIT 1) AS any_row")
                      .doOnNext(any -> {
                        if (any > 0) {
                          oldestStart[0] = Math.min(oldestStart[0], newest * period);
                        }
                      })
                      .thenReturn(-1L);
                }
                long reusedAt = (newest + slots) * period; // the start of the slot's next period
                return queryLong(c, "SELECT count(*) FROM (SELECT 1 FROM " + partition + " LIMIT 1) AS any_row")
                    .flatMap(any -> any == 0
                        ? Mono.just(-1L)
                        : queryLong(c,
                            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = '" + partition + "'::regclass")
                            .flatMap(estimate -> execute(c, "LOCK TABLE " + partition + " IN ACCESS EXCLUSIVE MODE")
                                // The decision above used the transaction's start time; the statements since and the
                                // lock wait may have run into the slot's next period, in which consumers record new
                                // ids in it. With the lock held, every row in the slot was committed before this
                                // clock reading, so only a reading before the next period proves none is new.
                                .then(queryLong(c, "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"))
                                .flatMap(locked -> {
                                  if (locked < reusedAt) {
                                    return execute(c, "TRUNCATE " + partition).thenReturn(estimate);
                                  }
                                  skipped[0]++;
                                  log.warn("Retention of {}: slot {} was due to be emptied but its lock was granted {} ms after "
                                      + "its next period began; it is kept with the ids recorded in it since (its old ids stay "
                                      + "one more cycle, never shorter)", inbox.table(), partition, locked - reusedAt);
                                  return Mono.just(-1L);
                                })));
              }))
              .map(estimate -> {
                if (estimate >= 0) {
                  long took = System.nanoTime() - start;
                  removed[0] += estimate;
                  batches[0]++;
                  longest[0] = Math.max(longest[0], took);
                  metrics.batch(partition, estimate, Duration.ofNanos(took));
                }
                return estimate;
              })
              .onErrorResume(e -> e instanceof R2dbcException r && LOCK_NOT_AVAILABLE.equals(r.getSqlState()), e -> {
                skipped[0]++;
                log.warn("Retention of {}: slot {} is due to be emptied but its lock was not free within {}; trying again at the "
                    + "next run (ids stay longer meanwhile, never shorter): {}", inbox.table(), partition, lockTimeout,
                    LogText.cut(e.getMessage()));
                return Mono.just(-1L);
              });
        })
        .then(Mono.fromSupplier(() -> {
          Duration age = oldestStart[0] == Long.MAX_VALUE
              ? Duration.ZERO
              : Duration.ofMillis(Math.max(0, nowSeen[0] - oldestStart[0]));
          metrics.oldestKept(inbox.table(), age);
          return new CleanupReport.TableReport(inbox.table(), removed[0], batches[0], Duration.ofNanos(longest[0]), age,
              skipped[0]);
        }));
  }

  // ---- helpers ----

  private TransactionRunner transactions(ConnectionFactory factory) {
    return new R2dbcTransactionRunner(factory, new ServerTimeouts(statementTimeout, lockTimeout, statementTimeout));
  }

  private static Mono<Long> rowsUpdated(Statement statement) {
    return Flux.from(statement.execute()).concatMap(r -> Mono.from(r.getRowsUpdated())).reduce(0L, Long::sum);
  }

  private static Mono<Void> execute(Connection c, String sql) {
    return rowsUpdated(c.createStatement(sql)).then();
  }

  private static Mono<Long> queryLong(Connection c, String sql) {
    return Flux.from(c.createStatement(sql).execute()).concatMap(r -> r.map(row -> row.get(0, Long.class))).next();
  }

  private Mono<Double> queryDouble(ConnectionFactory factory, String sql) {
    return Mono.usingWhen(factory.create(),
        c -> Flux.from(c.createStatement(sql).execute())
            .concatMap(r -> r.map(row -> {
              Double value = row.get(0, Double.class);
              return value == null ? 0.0 : value;
            }))
            .next()
            .defaultIfEmpty(0.0),
        Connection::close);
  }

  @Override
  public String toString() {
    return "Retention[" + targets + ", interval=" + interval + ", batchSize=" + batchSize + ", horizons=" + horizons.size()
        + ", allowWindowShorterThanBroker=" + allowShorter + "]";
  }

  /** One table to clean. */
  private record Target(String table, Duration window, ConnectionFactory connectionFactory, boolean outbox,
      @Nullable PostgresInbox inbox, @Nullable RotatingLayout rotating, boolean checkedAgainstBroker) {

    @Override
    public String toString() {
      return table + " (" + (outbox ? "sent outbox rows" : rotating != null ? "rotating inbox" : "inbox") + ", window " + window
          + ")";
    }
  }

  /** Configures a {@link Retention}; setters check their argument and name it in the error. */
  public static final class Builder {
    private final List<Target> targets = new ArrayList<>();
    private final List<RedeliveryHorizon> horizons = new ArrayList<>();
    private boolean allowShorter;
    private Duration interval = DEFAULT_INTERVAL;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private Duration batchPause = DEFAULT_BATCH_PAUSE;
    private Duration lockTimeout = DEFAULT_LOCK_TIMEOUT;
    private Duration statementTimeout = DEFAULT_STATEMENT_TIMEOUT;
    private RetentionMetrics metrics = RetentionMetrics.NONE;

    private Builder() {}

    /**
     * Keeps processed ids of an inbox for {@code window}. For a rotating inbox the window must
     * not exceed its layout's window (its slots are sized for it).
     *
     * @param inbox the inbox table
     * @param window positive; must exceed the broker's redelivery horizon
     * @return this builder
     */
    public Builder inbox(PostgresInbox inbox, Duration window) {
      Objects.requireNonNull(inbox, "inbox");
      positive("inbox window", window);
      RotatingLayout layout = inbox.rotatingLayout();
      if (layout != null && window.compareTo(layout.window()) > 0) {
        throw new IllegalArgumentException(
            "inbox window " + window + " exceeds the window " + layout.window() + " that the rotating inbox "
                + inbox.table() + " was laid out for; create it with a longer window");
      }
      targets.add(new Target(inbox.table(), window, inbox.connectionFactory(), false, inbox, layout, true));
      return this;
    }

    /**
     * Keeps sent outbox rows for {@code window} after they were sent; pending and parked rows
     * are never removed.
     *
     * @param outbox the outbox table
     * @param window positive
     * @return this builder
     */
    public Builder outbox(PostgresOutbox outbox, Duration window) {
      Objects.requireNonNull(outbox, "outbox");
      positive("outbox window", window);
      targets.add(new Target(outbox.table(), window, outbox.connectionFactory(), true, null, null, false));
      return this;
    }

    /**
     * Checks every inbox window against a broker's redelivery horizon when retention starts.
     * Default: no check.
     *
     * @param horizon the broker's horizon, e.g. {@code KafkaRedeliveryHorizon.of(...)}
     * @return this builder
     */
    public Builder checkedAgainst(RedeliveryHorizon horizon) {
      horizons.add(Objects.requireNonNull(horizon, "horizon"));
      return this;
    }

    /**
     * Starts even when a window is shorter than a broker's horizon (logged at WARN), for setups
     * where redelivery is bounded by something the broker does not show. Default {@code false}.
     *
     * @param allow whether to allow it
     * @return this builder
     */
    public Builder allowWindowShorterThanBroker(boolean allow) {
      this.allowShorter = allow;
      return this;
    }

    /**
     * Time between cleanup runs. For a rotating inbox it must be shorter than half its period.
     * Default 1 min.
     *
     * @param interval positive
     * @return this builder
     */
    public Builder interval(Duration interval) {
      this.interval = positive("interval", interval);
      return this;
    }

    /**
     * Rows per {@code DELETE}. Default {@value Retention#DEFAULT_BATCH_SIZE}.
     *
     * @param batchSize 1 to 100,000
     * @return this builder
     */
    public Builder batchSize(int batchSize) {
      if (batchSize < 1 || batchSize > 100_000) {
        throw new IllegalArgumentException("batchSize must be between 1 and 100000, was " + batchSize);
      }
      this.batchSize = batchSize;
      return this;
    }

    /**
     * Pause between two batches, which leaves the database to the live workload. Default 10 ms.
     *
     * @param batchPause zero or positive
     * @return this builder
     */
    public Builder batchPause(Duration batchPause) {
      Objects.requireNonNull(batchPause, "batchPause");
      if (batchPause.isNegative()) {
        throw new IllegalArgumentException("batchPause must not be negative, was " + batchPause);
      }
      this.batchPause = batchPause;
      return this;
    }

    /**
     * The longest a cleanup statement waits for a lock ({@code lock_timeout}); for a rotating
     * inbox, the longest pause a {@code TRUNCATE} can impose on the consumer. Default 200 ms.
     *
     * @param lockTimeout positive
     * @return this builder
     */
    public Builder lockTimeout(Duration lockTimeout) {
      this.lockTimeout = positive("lockTimeout", lockTimeout);
      return this;
    }

    /**
     * The longest cleanup statement ({@code statement_timeout}). Default 10 s.
     *
     * @param statementTimeout positive
     * @return this builder
     */
    public Builder statementTimeout(Duration statementTimeout) {
      this.statementTimeout = positive("statementTimeout", statementTimeout);
      return this;
    }

    /**
     * Where retention reports. Default {@link RetentionMetrics#NONE}.
     *
     * @param metrics the sink
     * @return this builder
     */
    public Builder metrics(RetentionMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics, "metrics");
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the retention
     * @throws IllegalArgumentException when no table is configured, or the interval is too long
     *     for a rotating inbox's period
     */
    public Retention build() {
      if (targets.isEmpty()) {
        throw new IllegalArgumentException("retention needs at least one table: inbox(...) or outbox(...)");
      }
      for (Target target : targets) {
        if (target.rotating() != null) {
          Duration period = target.rotating().period();
          if (interval.multipliedBy(2).compareTo(period) > 0) {
            throw new IllegalArgumentException(
                "interval " + interval + " must be at most half the period " + period + " of the rotating inbox "
                    + target.table() + ", so that each slot is emptied before it is reused");
          }
          if (lockTimeout.multipliedBy(4).compareTo(period) > 0) {
            throw new IllegalArgumentException("lockTimeout " + lockTimeout + " must be at most a quarter of the period " + period
                + " of the rotating inbox " + target.table());
          }
        }
      }
      return new Retention(this);
    }

    private static Duration positive(String name, Duration value) {
      Objects.requireNonNull(value, name);
      if (value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException(name + " must be positive, was " + value);
      }
      return value;
    }
  }
}
