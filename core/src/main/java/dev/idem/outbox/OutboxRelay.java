package dev.idem.outbox;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.internal.Backoff;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.RetryWarnings;
import dev.idem.internal.Wakeup;
import dev.idem.outbox.RelayMark.Failure;
import dev.idem.outbox.RelayMark.Round;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.stream.IntStream;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * Sends the rows of a {@link PostgresOutbox} through an {@link OutboxPublisher}, at least once,
 * each with its stable message id.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder(outbox, RabbitOutboxPublisher.create(rabbitUri))
 *     .ordering(RelayOrdering.BY_KEY)
 *     .build();
 * Disposable running = relay.run().subscribe();   // until disposed
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Marked only after confirmation.</b> Each round claims up to {@code batchSize} due rows
 *       in a transaction ({@code SELECT ... FOR UPDATE SKIP LOCKED}), publishes them, and in the
 *       same transaction marks the confirmed ones {@code SENT} and records the failed ones, then
 *       commits. A row is never marked sent before its destination confirmed it.</li>
 *   <li><b>At least once, with one id.</b> If the relay dies (or its commit fails) between the
 *       publish and the commit of the mark, the transaction rolls back and the row is published
 *       again later with the same {@link OutboxMessage#id()}: the destination may see it twice
 *       and deduplicates on the id (an Idem consumer downstream does so by itself).</li>
 *   <li><b>Never concurrently.</b> Several relays (and {@code workers} of one relay) on one table
 *       never publish the same row at the same time: a claimed row stays locked until its round
 *       commits or rolls back, and others skip it.</li>
 *   <li><b>Ordered</b> per {@link RelayOrdering}: {@code BY_KEY} by default.</li>
 *   <li><b>Failures.</b> A failed publish is recorded on the row ({@code attempts},
 *       {@code last_error}) and retried after a jittered exponential backoff
 *       ({@code firstBackoff} doubling to {@code maxBackoff}); at {@code maxAttempts} the row is
 *       parked: kept, listed by {@link PostgresOutbox#parked}, counted, logged at WARN, and sent
 *       again after {@link PostgresOutbox#resend} or {@link PostgresOutbox#resendParked()}. The
 *       relay goes on with other rows. A database that fails (unreachable, a failed commit) is
 *       retried without limit with backoff, logged at WARN when it starts and every minute while
 *       it lasts: rows wait in the table meanwhile, nothing is lost.</li>
 *   <li><b>Low latency without busy polling.</b> The relay {@code LISTEN}s on the outbox's channel
 *       (on a connection of its own, outside the pool) and rounds start when a committed
 *       {@link PostgresOutbox#add} notifies; it also polls every {@code pollInterval}, which
 *       covers rows written without notification, lost notifications and a lost listening
 *       connection (re-established with backoff). A full batch is followed by the next round at
 *       once.</li>
 * </ul>
 *
 * <p>A round runs three steps, each a class of this package: the claim ({@code RelayClaim}), the
 * publish ({@code RelayPublish}) and the mark ({@code RelayMark}).
 *
 * <p>Each round holds one pooled connection in a transaction while it publishes (bounded by
 * {@code publishTimeout}); size the pool for {@code workers} more connections. Immutable and
 * thread-safe; {@link #run()} may be subscribed more than once (each subscription is a relay).
 */
public final class OutboxRelay {

  /** Default rows per round: {@value}. */
  public static final int DEFAULT_BATCH_SIZE = 100;
  /** Default concurrent rounds per relay: {@value}. */
  public static final int DEFAULT_WORKERS = 1;
  /** Default ordering: {@link RelayOrdering#BY_KEY}. */
  public static final RelayOrdering DEFAULT_ORDERING = RelayOrdering.BY_KEY;
  /** Default polling fallback: 2 s. */
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(2);
  /** Default longest wait for a batch's confirmations: 30 s. */
  public static final Duration DEFAULT_PUBLISH_TIMEOUT = Duration.ofSeconds(30);
  /** Default attempts before a row is parked: {@value}. */
  public static final int DEFAULT_MAX_ATTEMPTS = 20;
  /** Default first backoff after a failed publish: 1 s. */
  public static final Duration DEFAULT_FIRST_BACKOFF = Duration.ofSeconds(1);
  /** Default longest backoff after failed publishes: 5 min. */
  public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofMinutes(5);
  /** Default interval of the stats query when metrics are on: 10 s. */
  public static final Duration DEFAULT_STATS_INTERVAL = Duration.ofSeconds(10);

  private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);
  private static final Duration STATEMENT_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration WARNING_INTERVAL = Duration.ofMinutes(1);
  private static final Duration DATABASE_FIRST_BACKOFF = Duration.ofMillis(200);
  private static final Duration DATABASE_MAX_BACKOFF = Duration.ofSeconds(30);

  private final PostgresOutbox outbox;
  private final String name;
  private final RelayOrdering ordering;
  private final int batchSize;
  private final int workers;
  private final Duration pollInterval;
  private final Duration publishTimeout;
  private final int maxAttempts;
  private final boolean listen;
  private final OutboxMetrics metrics;
  private final Duration statsInterval;
  private final TransactionRunner transactions;
  private final RelayClaim claim;
  private final RelayPublish publish;
  private final RelayMark mark;

  private OutboxRelay(Builder b) {
    this.outbox = b.outbox;
    this.name = b.name != null ? b.name : outbox.table();
    this.ordering = b.ordering;
    this.batchSize = b.batchSize;
    this.workers = b.workers;
    this.pollInterval = b.pollInterval;
    this.publishTimeout = b.publishTimeout;
    this.maxAttempts = b.maxAttempts;
    this.listen = b.listen;
    this.metrics = b.metrics;
    this.statsInterval = b.statsInterval;
    // The round's transaction stays open while the batch is published: the server ends it if the
    // client goes silent for longer than the publish may take.
    this.transactions = new R2dbcTransactionRunner(outbox.connectionFactory(),
        new ServerTimeouts(STATEMENT_TIMEOUT, STATEMENT_TIMEOUT, publishTimeout.plus(STATEMENT_TIMEOUT)));
    this.claim = new RelayClaim(outbox.table(), ordering, batchSize);
    this.publish = new RelayPublish(b.publisher, publishTimeout);
    this.mark = new RelayMark(name, outbox.table(), batchSize, maxAttempts, b.firstBackoff, b.maxBackoff, metrics);
  }

  /**
   * Starts a builder.
   *
   * @param outbox the outbox table to relay
   * @param publisher where its messages go
   * @return a builder
   */
  public static Builder builder(PostgresOutbox outbox, OutboxPublisher publisher) {
    return new Builder(outbox, publisher);
  }

  /**
   * Runs the relay until the subscription is cancelled. Nothing happens before subscription.
   * Per-row and database failures never end the stream (see the class documentation); only a
   * JVM error does.
   *
   * @return the messages sent, each emitted after its row was marked sent and committed
   */
  public Flux<OutboxMessage> run() {
    return Flux.defer(() -> {
      Wakeup wakeup = new Wakeup();
      List<Publisher<OutboxMessage>> parts = new ArrayList<>();
      IntStream.range(0, workers).forEach(i -> parts.add(worker(i, wakeup)));
      if (listen) {
        parts.add(listen(wakeup).then(Mono.empty()));
      }
      if (metrics.wantsStats()) {
        parts.add(statsLoop().then(Mono.empty()));
      }
      log.info("Outbox relay '{}' started on {} ({} worker(s), batches of {}, {}, {})", name, outbox.table(), workers, batchSize,
          ordering,
          listen
              ? "LISTEN on channel " + outbox.channel() + " and polling every " + pollInterval
              : "polling every " + pollInterval);
      return Flux.merge(parts).onErrorMap(RelayPublish.FatalPublisherError.class, Throwable::getCause);
    });
  }

  /**
   * One claim loop: a round, then at once another while rounds find rows (sending a key's row
   * makes its next row due, and a full batch may leave more), else a wait for a notification,
   * the poll or the earliest retry this loop scheduled.
   */
  private Flux<OutboxMessage> worker(int index, Wakeup wakeup) {
    RetryWarnings warnings = new RetryWarnings(log, "Outbox relay '" + name + "' (worker " + index + "): claim, publish and mark",
        WARNING_INTERVAL);
    Instant[] nextDue = new Instant[1];
    return Flux.defer(() -> {
      long seen = wakeup.version();
      return round()
          .flatMapMany(round -> {
            warnings.succeeded();
            if (round.nextDue() != null && (nextDue[0] == null || round.nextDue().isBefore(nextDue[0]))) {
              nextDue[0] = round.nextDue();
            }
            Mono<OutboxMessage> next = Mono.empty();
            if (round.sent().isEmpty() && !round.full()) {
              Duration wait = waitAtMost(nextDue[0]);
              if (nextDue[0] != null && !nextDue[0].isAfter(Instant.now().plus(wait))) {
                nextDue[0] = null;
              }
              next = wakeup.await(seen, wait).then(Mono.empty());
            }
            return Flux.fromIterable(round.sent()).concatWith(next);
          })
          .onErrorResume(error -> !JvmErrors.isFatal(error), error -> {
            int failures = warnings.failed(error);
            return Mono.delay(Backoff.jittered(DATABASE_FIRST_BACKOFF, DATABASE_MAX_BACKOFF, failures - 1)).then(Mono.empty());
          });
    }).repeat();
  }

  /** The poll interval, or less when a retry is due sooner. */
  private Duration waitAtMost(@Nullable Instant nextDue) {
    if (nextDue == null) {
      return pollInterval;
    }
    Duration untilDue = Duration.between(Instant.now(), nextDue);
    return untilDue.isNegative() ? Duration.ZERO : untilDue.compareTo(pollInterval) < 0 ? untilDue : pollInterval;
  }

  private Mono<Round> round() {
    List<Failure> failures = new ArrayList<>();
    java.util.concurrent.atomic.AtomicBoolean published = new java.util.concurrent.atomic.AtomicBoolean();
    return transactions.inTransaction(connection -> claim.claim(connection)
        .flatMap(batch -> batch.isEmpty()
            ? Mono.just(new Round(List.of(), 0, null, false))
            : publish.publish(batch)
                .doOnSuccess(errors -> published.set(true))
                .flatMap(errors -> mark.mark(connection, batch, errors, failures))))
        .timeout(publishTimeout.plus(STATEMENT_TIMEOUT).plus(STATEMENT_TIMEOUT))
        .doOnSuccess(round -> mark.afterCommit(round, failures))
        .doOnError(error -> {
          if (published.get()) {
            log.warn(
                "Outbox relay '{}': a batch was published but its mark did not commit ({}); its rows stay pending and will be "
                    + "published again with the same ids",
                name, LogText.cut(error.toString()));
          }
        });
  }

  /** Listens on the outbox's channel on a connection of its own; re-listens with backoff when it is lost. */
  private Mono<Void> listen(Wakeup wakeup) {
    RetryWarnings warnings = new RetryWarnings(log, "Outbox relay '" + name + "': LISTEN " + outbox.channel()
        + " (polling every " + pollInterval + " meanwhile)", WARNING_INTERVAL);
    return Flux.usingWhen(listeningConnection(),
        connection -> Flux.merge(
            connection.getNotifications().map(notification -> Boolean.TRUE),
            Flux.from(connection.createStatement("LISTEN " + outbox.channel()).execute())
                .concatMap(result -> result.getRowsUpdated())
                .then(Mono.fromRunnable(() -> {
                  warnings.succeeded();
                  wakeup.signal(); // rows committed while nobody listened
                }))
                .then(Mono.<Boolean>empty())),
        Connection::close)
        .doOnNext(notification -> wakeup.signal())
        .then(Mono.<Void>error(new IllegalStateException("the listening connection closed")))
        .retryWhen(Retry.from(signals -> signals.concatMap(signal -> {
          Throwable error = signal.failure();
          if (JvmErrors.isFatal(error) || error instanceof ListenUnsupported) {
            return Mono.error(error);
          }
          int failures = warnings.failed(error);
          return Mono.delay(Backoff.jittered(DATABASE_FIRST_BACKOFF, DATABASE_MAX_BACKOFF, failures - 1));
        })))
        .onErrorResume(ListenUnsupported.class, unsupported -> {
          log.info("Outbox relay '{}': {}; it polls every {}", name, unsupported.getMessage(), pollInterval);
          return Mono.empty();
        });
  }

  /** A PostgreSQL connection outside the pool (LISTEN holds it for as long as the relay runs). */
  private Mono<PostgresqlConnection> listeningConnection() {
    ConnectionFactory factory = outbox.connectionFactory();
    while (factory instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof ConnectionFactory inner && inner != factory) {
      factory = inner;
    }
    return Mono.from(factory.create())
        .timeout(STATEMENT_TIMEOUT)
        .flatMap(connection -> {
          Connection physical = connection;
          while (physical instanceof Wrapped<?> wrapped && wrapped.unwrap() instanceof Connection inner && inner != physical) {
            physical = inner;
          }
          if (physical instanceof PostgresqlConnection postgres) {
            return Mono.just(postgres);
          }
          return Mono.from(connection.close()).then(Mono.error(new ListenUnsupported(
              "the connection factory does not give r2dbc-postgresql connections, so LISTEN/NOTIFY is not available")));
        });
  }

  private Mono<Void> statsLoop() {
    return Flux.interval(Duration.ZERO, statsInterval)
        .onBackpressureDrop()
        .concatMap(tick -> outbox.stats()
            .doOnNext(metrics::stats)
            .onErrorResume(error -> !JvmErrors.isFatal(error), error -> {
              log.debug("Outbox relay '{}': the stats query failed: {}", name, error.toString());
              return Mono.empty();
            }), 1)
        .then();
  }

  @Override
  public String toString() {
    return "OutboxRelay[name=" + name + ", outbox=" + outbox + ", ordering=" + ordering + ", batchSize=" + batchSize
        + ", workers=" + workers + ", maxAttempts=" + maxAttempts + "]";
  }

  /** The relay's connection factory gives no PostgreSQL connection to listen on. */
  private static final class ListenUnsupported extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ListenUnsupported(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * Configures an {@link OutboxRelay}. Setters check their argument and name it in the error.
   */
  public static final class Builder {
    private final PostgresOutbox outbox;
    private final OutboxPublisher publisher;
    private @Nullable String name;
    private RelayOrdering ordering = DEFAULT_ORDERING;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private int workers = DEFAULT_WORKERS;
    private Duration pollInterval = DEFAULT_POLL_INTERVAL;
    private Duration publishTimeout = DEFAULT_PUBLISH_TIMEOUT;
    private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
    private Duration firstBackoff = DEFAULT_FIRST_BACKOFF;
    private Duration maxBackoff = DEFAULT_MAX_BACKOFF;
    private boolean listen = true;
    private OutboxMetrics metrics = OutboxMetrics.NONE;
    private Duration statsInterval = DEFAULT_STATS_INTERVAL;

    private Builder(PostgresOutbox outbox, OutboxPublisher publisher) {
      this.outbox = Objects.requireNonNull(outbox, "outbox");
      this.publisher = Objects.requireNonNull(publisher, "publisher");
    }

    /**
     * A name for logs. Default the outbox's table name.
     *
     * @param name not blank
     * @return this builder
     */
    public Builder name(String name) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("name must not be blank");
      }
      this.name = name;
      return this;
    }

    /**
     * Which rows may be sent together. Default {@link RelayOrdering#BY_KEY}.
     *
     * @param ordering the mode
     * @return this builder
     */
    public Builder ordering(RelayOrdering ordering) {
      this.ordering = Objects.requireNonNull(ordering, "ordering");
      return this;
    }

    /**
     * Rows claimed and published per round (per transaction). Larger batches amortise round
     * trips; each round's rows wait for the slowest confirmation. Default
     * {@value OutboxRelay#DEFAULT_BATCH_SIZE}.
     *
     * @param batchSize 1 to 10,000
     * @return this builder
     */
    public Builder batchSize(int batchSize) {
      if (batchSize < 1 || batchSize > 10_000) {
        throw new IllegalArgumentException("batchSize must be between 1 and 10000, was " + batchSize);
      }
      this.batchSize = batchSize;
      return this;
    }

    /**
     * Rounds run at once by this relay, each on its own connection and transaction. Default
     * {@value OutboxRelay#DEFAULT_WORKERS}.
     *
     * @param workers 1 to 64
     * @return this builder
     */
    public Builder workers(int workers) {
      if (workers < 1 || workers > 64) {
        throw new IllegalArgumentException("workers must be between 1 and 64, was " + workers);
      }
      this.workers = workers;
      return this;
    }

    /**
     * The polling fallback: the longest wait between rounds when no notification arrives.
     * Default 2 s.
     *
     * @param pollInterval positive
     * @return this builder
     */
    public Builder pollInterval(Duration pollInterval) {
      this.pollInterval = positive("pollInterval", pollInterval);
      return this;
    }

    /**
     * The longest wait for a batch's confirmations; messages unconfirmed by then count as failed
     * attempts. Default 30 s.
     *
     * @param publishTimeout positive
     * @return this builder
     */
    public Builder publishTimeout(Duration publishTimeout) {
      this.publishTimeout = positive("publishTimeout", publishTimeout);
      return this;
    }

    /**
     * Attempts before a row is parked. Default {@value OutboxRelay#DEFAULT_MAX_ATTEMPTS}, which
     * with the default backoff parks a row after about an hour of failures.
     *
     * @param maxAttempts at least 1
     * @return this builder
     */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be at least 1, was " + maxAttempts);
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /**
     * The backoff between attempts of a row: {@code first}, doubling up to {@code max}, with 50%
     * jitter. Default 1 s to 5 min.
     *
     * @param first positive
     * @param max at least {@code first}
     * @return this builder
     */
    public Builder backoff(Duration first, Duration max) {
      positive("backoff first", first);
      positive("backoff max", max);
      if (max.compareTo(first) < 0) {
        throw new IllegalArgumentException("backoff max (" + max + ") must be at least first (" + first + ")");
      }
      this.firstBackoff = first;
      this.maxBackoff = max;
      return this;
    }

    /**
     * Whether to LISTEN for the outbox's notifications. Default {@code true}; without it the
     * relay finds rows by polling only.
     *
     * @param listen whether to listen
     * @return this builder
     */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /**
     * Where the relay reports. Default {@link OutboxMetrics#NONE}.
     *
     * @param metrics the sink, e.g. {@code new MicrometerOutboxMetrics(registry, "notifications")}
     * @return this builder
     */
    public Builder metrics(OutboxMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics, "metrics");
      return this;
    }

    /**
     * How often the stats query runs when metrics are on. Default 10 s.
     *
     * @param statsInterval positive
     * @return this builder
     */
    public Builder statsInterval(Duration statsInterval) {
      this.statsInterval = positive("statsInterval", statsInterval);
      return this;
    }

    /**
     * Builds the relay.
     *
     * @return the relay
     */
    public OutboxRelay build() {
      return new OutboxRelay(this);
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
