package dev.idem.outbox;

import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.internal.Backoff;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.RetryWarnings;
import dev.idem.internal.Wakeup;
import io.r2dbc.postgresql.api.PostgresqlConnection;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Wrapped;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import java.util.stream.IntStream;
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
  private final OutboxPublisher publisher;
  private final String name;
  private final RelayOrdering ordering;
  private final int batchSize;
  private final int workers;
  private final Duration pollInterval;
  private final Duration publishTimeout;
  private final int maxAttempts;
  private final Duration firstBackoff;
  private final Duration maxBackoff;
  private final boolean listen;
  private final OutboxMetrics metrics;
  private final Duration statsInterval;
  private final TransactionRunner transactions;
  private final String claimSql;
  private final String markSentSql;
  private final String markFailedSql;

  private OutboxRelay(Builder b) {
    this.outbox = b.outbox;
    this.publisher = b.publisher;
    this.name = b.name != null ? b.name : outbox.table();
    this.ordering = b.ordering;
    this.batchSize = b.batchSize;
    this.workers = b.workers;
    this.pollInterval = b.pollInterval;
    this.publishTimeout = b.publishTimeout;
    this.maxAttempts = b.maxAttempts;
    this.firstBackoff = b.firstBackoff;
    this.maxBackoff = b.maxBackoff;
    this.listen = b.listen;
    this.metrics = b.metrics;
    this.statsInterval = b.statsInterval;
    // The round's transaction stays open while the batch is published: the server ends it if the
    // client goes silent for longer than the publish may take.
    this.transactions = new R2dbcTransactionRunner(outbox.connectionFactory(),
        new ServerTimeouts(STATEMENT_TIMEOUT, STATEMENT_TIMEOUT, publishTimeout.plus(STATEMENT_TIMEOUT)));
    String table = outbox.table();
    String keyOrder = ordering == RelayOrdering.BY_KEY
        ? " AND NOT EXISTS (SELECT 1 FROM " + table + " e WHERE e.message_key = o.message_key AND e.status <> 'SENT' AND e.seq < o.seq)"
        : "";
    this.claimSql = "SELECT " + PostgresOutbox.COLUMNS + " FROM " + table + " o"
        + " WHERE o.status = 'PENDING' AND o.next_attempt_at <= now()" + keyOrder
        + " ORDER BY o.seq LIMIT $1 FOR UPDATE OF o SKIP LOCKED";
    this.markSentSql = "UPDATE " + table + " SET status = 'SENT', sent_at = clock_timestamp(), attempts = attempts + 1"
        + " WHERE seq = ANY($1::bigint[])";
    this.markFailedSql = "UPDATE " + table + " AS t SET attempts = t.attempts + 1, last_error = f.error,"
        + " status = CASE WHEN t.attempts + 1 >= $4 THEN 'PARKED' ELSE 'PENDING' END,"
        + " parked_at = CASE WHEN t.attempts + 1 >= $4 THEN clock_timestamp() END,"
        + " next_attempt_at = clock_timestamp() + make_interval(secs => f.delay)"
        + " FROM unnest($1::bigint[], $2::text[], $3::float8[]) AS f(seq, error, delay) WHERE t.seq = f.seq";
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
          ordering, listen ? "LISTEN on channel " + outbox.channel() + " and polling every " + pollInterval : "polling every " + pollInterval);
      return Flux.merge(parts).onErrorMap(FatalPublisherError.class, Throwable::getCause);
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
  private Duration waitAtMost(Instant nextDue) {
    if (nextDue == null) {
      return pollInterval;
    }
    Duration untilDue = Duration.between(Instant.now(), nextDue);
    return untilDue.isNegative() ? Duration.ZERO : untilDue.compareTo(pollInterval) < 0 ? untilDue : pollInterval;
  }

  /** The outcome of one committed round. */
  private record Round(List<OutboxMessage> sent, int claimed, Instant nextDue, boolean full) {}

  private Mono<Round> round() {
    List<Failure> failures = new ArrayList<>();
    java.util.concurrent.atomic.AtomicBoolean published = new java.util.concurrent.atomic.AtomicBoolean();
    return transactions.inTransaction(connection -> claim(connection)
            .flatMap(batch -> batch.isEmpty()
                ? Mono.just(new Round(List.of(), 0, null, false))
                : publish(batch)
                    .doOnSuccess(errors -> published.set(true))
                    .flatMap(errors -> mark(connection, batch, errors, failures))))
        .timeout(publishTimeout.plus(STATEMENT_TIMEOUT).plus(STATEMENT_TIMEOUT))
        .doOnSuccess(round -> afterCommit(round, failures))
        .doOnError(error -> {
          if (published.get()) {
            log.warn("Outbox relay '{}': a batch was published but its mark did not commit ({}); its rows stay pending and will be "
                + "published again with the same ids", name, LogText.cut(error.toString()));
          }
        });
  }

  /** A failed publish attempt. */
  private record Failure(OutboxMessage message, Throwable error, boolean parked) {}

  private Mono<List<OutboxMessage>> claim(Connection connection) {
    return Flux.from(connection.createStatement(claimSql).bind(0, batchSize).execute())
        .concatMap(result -> result.map((row, meta) -> PostgresOutbox.message(row)))
        .collectList();
  }

  /**
   * Publishes a batch through the user's publisher, guarded: whatever it throws or signals
   * (JVM errors excepted) fails the messages concerned.
   *
   * @return the failed messages' errors by seq; the others were confirmed
   */
  private Mono<Map<Long, Throwable>> publish(List<OutboxMessage> batch) {
    Map<Long, Throwable> errors = new java.util.concurrent.ConcurrentHashMap<>();
    java.util.Set<Long> confirmed = java.util.concurrent.ConcurrentHashMap.newKeySet();
    Throwable[] batchError = new Throwable[1];
    return guarded(List.copyOf(batch), result -> {
          if (result == null || result.message() == null) {
            return;
          }
          if (result.isSent()) {
            confirmed.add(result.message().seq());
          } else {
            errors.put(result.message().seq(), result.error());
          }
        })
        .timeout(publishTimeout)
        .onErrorResume(error -> !JvmErrors.isFatal(error), error -> {
          batchError[0] = error instanceof TimeoutException
              ? new TimeoutException("no confirmation within the publish timeout of " + publishTimeout) : error;
          return Mono.empty();
        })
        .then(Mono.fromSupplier(() -> {
          Map<Long, Throwable> failed = new HashMap<>();
          for (OutboxMessage message : batch) {
            Throwable error = errors.get(message.seq());
            if (error == null && !confirmed.contains(message.seq())) {
              error = batchError[0] != null ? batchError[0] : new IllegalStateException("the publisher reported no result for this message");
            }
            if (error != null) {
              failed.put(message.seq(), error);
            }
          }
          return failed;
        }));
  }

  /**
   * Subscribes the user's publisher with a plain subscriber inside try/catch: Reactor's operators
   * rethrow JVM errors up the calling stack instead of signalling them, and this is where such a
   * throw from the publisher's own code lands. A JVM error in a result is signalled as well.
   */
  private Mono<Void> guarded(List<OutboxMessage> batch, java.util.function.Consumer<OutboxPublisher.Result> onResult) {
    return Mono.create(sink -> {
      try {
        Objects.requireNonNull(publisher.publishAll(batch), "publishAll returned null").subscribe(new org.reactivestreams.Subscriber<>() {
          @Override
          public void onSubscribe(org.reactivestreams.Subscription subscription) {
            sink.onCancel(subscription::cancel);
            subscription.request(Long.MAX_VALUE);
          }

          @Override
          public void onNext(OutboxPublisher.Result result) {
            if (result != null && result.error() != null && JvmErrors.isFatal(result.error())) {
              sink.error(new FatalPublisherError(result.error()));
              return;
            }
            onResult.accept(result);
          }

          @Override
          public void onError(Throwable error) {
            sink.error(JvmErrors.isFatal(error) ? new FatalPublisherError(error) : error);
          }

          @Override
          public void onComplete() {
            sink.success();
          }
        });
      } catch (Throwable e) {
        sink.error(JvmErrors.isFatal(e) ? new FatalPublisherError(e) : e);
      }
    });
  }

  private Mono<Round> mark(Connection connection, List<OutboxMessage> batch, Map<Long, Throwable> errors, List<Failure> failures) {
    List<OutboxMessage> sent = new ArrayList<>();
    List<Long> failedSeqs = new ArrayList<>();
    List<String> failedErrors = new ArrayList<>();
    List<Double> delays = new ArrayList<>();
    Instant nextDue = null;
    for (OutboxMessage message : batch) {
      Throwable error = errors.get(message.seq());
      if (error == null) {
        sent.add(message);
        continue;
      }
      failures.add(new Failure(message, error, message.attempt() >= maxAttempts));
      Duration delay = Backoff.jittered(firstBackoff, maxBackoff, message.attempt() - 1);
      failedSeqs.add(message.seq());
      failedErrors.add(LogText.cut(describe(error)).replace('\0', ' '));
      delays.add(delay.toMillis() / 1000.0);
      Instant due = Instant.now().plus(delay);
      if (message.attempt() < maxAttempts && (nextDue == null || due.isBefore(nextDue))) {
        nextDue = due;
      }
    }
    Mono<Void> markSent = sent.isEmpty() ? Mono.empty()
        : execute(connection.createStatement(markSentSql).bind(0, sent.stream().map(OutboxMessage::seq).toArray(Long[]::new)));
    Mono<Void> markFailed = failedSeqs.isEmpty() ? Mono.empty()
        : execute(connection.createStatement(markFailedSql)
            .bind(0, failedSeqs.toArray(Long[]::new))
            .bind(1, failedErrors.toArray(String[]::new))
            .bind(2, delays.toArray(Double[]::new))
            .bind(3, maxAttempts));
    Round round = new Round(List.copyOf(sent), batch.size(), nextDue, batch.size() >= batchSize);
    return markSent.then(markFailed).onErrorMap(MarkFailed::new).thenReturn(round);
  }

  private void afterCommit(Round round, List<Failure> failures) {
    Instant now = Instant.now();
    for (OutboxMessage message : round.sent()) {
      metrics.published(message, Duration.between(message.createdAt(), now));
    }
    if (failures.isEmpty()) {
      return;
    }
    Failure first = failures.get(0);
    log.warn("Outbox relay '{}': {} of {} publishes failed and will be retried with backoff (parked at {} attempts); first: "
        + "message '{}' (row {}, attempt {}): {}", name, failures.size(), round.claimed(), maxAttempts,
        LogText.cutId(first.message().id()), first.message().seq(), first.message().attempt(), LogText.cut(describe(first.error())));
    for (Failure failure : failures) {
      metrics.failed(failure.message(), failure.error());
      if (failure.parked()) {
        OutboxMessage message = failure.message();
        log.warn("Outbox relay '{}' parked message '{}' (row {}, destination '{}') after {} attempts: {}. It stays in {} with status "
            + "PARKED; fix the cause, then PostgresOutbox.resend(\"{}\") or resendParked() sends it again with the same id",
            name, LogText.cutId(message.id()), message.seq(), LogText.cut(message.destination()), message.attempt(),
            LogText.cut(describe(failure.error())), outbox.table(), LogText.cutId(message.id()));
        metrics.parked(message);
      }
    }
  }

  private static String describe(Throwable error) {
    return error == null ? "unknown error" : error.toString();
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

  private static Mono<Void> execute(io.r2dbc.spi.Statement statement) {
    return Flux.from(statement.execute()).concatMap(result -> result.getRowsUpdated()).then();
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
   * Carries a JVM error of the publisher through the round's transaction as a plain exception:
   * Reactor rethrows JVM errors up the calling thread (for example from {@code then(Mono.error(e))})
   * instead of signalling them. Unwrapped where the relay's stream ends.
   */
  private static final class FatalPublisherError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    FatalPublisherError(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }

  /** Marking a published batch failed: the batch will be published again. */
  private static final class MarkFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MarkFailed(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }

  /**
   * Configures an {@link OutboxRelay}. Setters check their argument and name it in the error.
   */
  public static final class Builder {
    private final PostgresOutbox outbox;
    private final OutboxPublisher publisher;
    private String name;
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
