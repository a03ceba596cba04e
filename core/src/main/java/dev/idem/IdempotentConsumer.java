package dev.idem;

import dev.idem.internal.MessageObservations;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.StopControl;
import dev.idem.pipeline.ConsumerSettings;
import dev.idem.pipeline.Pipeline;
import dev.idem.postgres.PostgresInbox;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;

/**
 * Turns at-least-once deliveries into exactly one committed effect per message id.
 *
 * <p>For every {@link Delivery} of the source, in one database transaction: insert
 * {@code (consumer, message id)} into the inbox with {@code ON CONFLICT DO NOTHING}; when a row
 * was inserted run the {@link Handler} on the same transaction; commit; and only then
 * acknowledge the message and emit its {@link Outcome}. A message whose id is already recorded
 * is acknowledged as a {@link Outcome.Status#DUPLICATE duplicate} without running the handler.
 *
 * <pre>{@code
 * IdempotentConsumer<PaymentEvent> payments = IdempotentConsumer.<PaymentEvent>named("payments")
 *     .inbox(PostgresInbox.create(pool))
 *     .handler((event, tx) -> tx.sql("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
 *         .bind(0, event.amount()).bind(1, event.accountId()).execute())
 *     .concurrency(16)
 *     .ordering(Ordering.BY_KEY)
 *     .build();
 * Flux<Outcome<PaymentEvent>> outcomes = source.receive().transform(payments::process);
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Ack after commit.</b> A message is acknowledged only after its transaction committed,
 *       after it was found to be a duplicate, or after it was durably dead-lettered.</li>
 *   <li><b>Failure leaves nothing.</b> A failed attempt rolls back the dedup row with the effect.
 *       Errors have three origins, classified apart. <em>Handler</em> errors are the message's:
 *       retryable ones are retried per the {@link RetryPolicy}, then dead-lettered;
 *       non-retryable errors and bad input (missing, over-long or malformed id, missing or
 *       undecodable payload) are dead-lettered at once; contention (deadlock, serialization
 *       failure, lock timeout) is retried without spending attempts, up to a bound. A COMMIT
 *       refused after the handler ran (for example because the handler swallowed an SQL error)
 *       is the message's too. Errors of the <em>transaction</em> itself (connection, BEGIN,
 *       dedup insert, COMMIT, the {@code transactionTimeout}) are infrastructure: retried
 *       without limit, never dead-lettered or acknowledged, logged at WARN when they start and
 *       every {@code stuckWarningInterval} (default 1 min) while they last, by one message per consumer. <em>Settlement</em> (ack,
 *       dead-letter publish) is retried by the adapter; when it fails for good the message stays
 *       unacknowledged, a failed dead letter is logged at ERROR, and both are counted.</li>
 *   <li><b>JVM errors</b> ({@link VirtualMachineError} such as {@link OutOfMemoryError} or
 *       {@link StackOverflowError}, and {@link LinkageError}) thrown or emitted by the handler
 *       leave the message unacknowledged and terminate the returned {@code Flux} with that
 *       error, so that the application or its supervisor restarts; other {@link Error}s of the
 *       handler (an {@link AssertionError}) are handler errors like any other. Reactor's operators
 *       rethrow JVM errors up the calling thread's stack instead of signalling them. After a
 *       statement of {@link Tx#sql} or {@link Tx#outbox} (on the driver's thread), including
 *       in a mapping function over its rows, the statement's publisher catches such an error
 *       before it reaches the driver and ends the attempt with it, so the policy above holds in
 *       both modes. After an asynchronous step of the handler's own (a timer, another client, a
 *       statement on the raw {@link Tx#connection()}) the error cannot reach the pipeline, and
 *       the {@code transactionTimeout} ends the attempt, which is then retried as infrastructure
 *       (logged at WARN).</li>
 *   <li><b>Bounded.</b> At most {@code prefetch} messages are taken and not yet settled, and at
 *       most {@code concurrency} transactions run at once, each of one message or of a micro-batch
 *       of up to {@code maxBatchSize}; demand, not memory, absorbs a backlog.</li>
 *   <li><b>Ordered</b> per the {@link Ordering} mode.</li>
 *   <li><b>Cancellation</b> of the returned {@code Flux} stops taking messages and rolls back
 *       transactions in flight; those messages stay unacknowledged and are redelivered. A
 *       {@link GracefulShutdown} given to {@link #process(Publisher, GracefulShutdown)} stops
 *       instead: nothing new starts, what is in flight gets a grace period to commit and
 *       settle, then the stream completes.</li>
 *   <li><b>Metadata and tracing.</b> The handler sees its message's headers, key, partition,
 *       timestamp, attempt and broker coordinates through {@link Tx#metadata()}; with an
 *       {@link Builder#observationRegistry observation registry} each message is observed (see
 *       {@link IdemObservations}), continuing the trace of its {@code traceparent} header.</li>
 * </ul>
 *
 * <h2>Stages</h2>
 * <p>In the order a message meets them (the classes are in {@code dev.idem.pipeline}, {@code BatchLanes} in
 * {@code dev.idem.internal}; neither is API):
 * <ol>
 *   <li><b>Dispatch</b> ({@code Dispatch}): at most {@code prefetch} messages taken and not yet
 *       settled, {@code concurrency} lanes ({@code BatchLanes}) that keep the order the
 *       {@link Ordering} mode asks for and form micro-batches, of one message each with
 *       {@code maxBatchSize(1)}: one dispatcher for both modes.</li>
 *   <li><b>Validation</b> ({@code DeliveryValidation}): bad input is dead-lettered at once.</li>
 *   <li><b>The path</b>: {@code MessagePath} for one message, {@code BatchPath} for a micro-batch;
 *       a batch path hands a message that made its batch fail to the message path, off its lane.</li>
 *   <li><b>The gate</b> ({@code DeadlockRecovery}): every transaction attempt passes it; one that
 *       follows a deadlock ({@code 40P01}), or has a message of a key that deadlocked lately, runs
 *       alone, without the consumer's other transactions, so that deadlocks are not paid again and again.</li>
 *   <li><b>The transaction</b> ({@code BatchTransaction}, one for a batch and for a message
 *       alone): BEGIN, the dedup insert, the handler run by the {@code EffectRunner} for each new
 *       message, COMMIT;
 *       the {@code PipelineFailures} markers tell the handler's errors from the transaction's.</li>
 *   <li><b>The retry decision</b> after a failed attempt: {@code FailureKinds} classifies the
 *       failure by its origin, {@code RetryDecision} backs off and retries, splits the batch, or
 *       gives up.</li>
 *   <li><b>Settlement</b> ({@code Settlement}): ack or dead letter, then the {@link Outcome}.</li>
 * </ol>
 * All of them read the consumer's settings ({@code ConsumerSettings}), fixed at build time.
 *
 * <p>Instances are immutable and thread-safe; {@link #process} may be called for several sources.
 *
 * @param <T> the payload type
 */
public final class IdempotentConsumer<T> {

  /** Default in-flight limit (with batching: lanes, each running one transaction at a time): {@value}. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /**
   * Default buffer of messages requested ahead of processing: {@value}
   * ({@code concurrency x maxBatchSize}), so that batches of up to 128 form on each lane under
   * load. The size of the batches, not the number of lanes, decides the throughput of batch mode:
   * with 256 buffered the defaults ran at about half the speed (see docs/benchmarks.md).
   */
  public static final int DEFAULT_PREFETCH = 1024;
  /**
   * Default largest micro-batch: {@value}; 1 turns batching off. A batch never waits to fill: at
   * low load batches hold one message. The system property {@value #MAX_BATCH_SIZE_PROPERTY}
   * replaces this default for every consumer that does not set its own.
   */
  public static final int DEFAULT_MAX_BATCH_SIZE = 128;
  /** Default time an idle batch lane waits for more messages: zero, a batch starts at once with what is there. */
  public static final Duration DEFAULT_BATCH_MAX_WAIT = Duration.ZERO;
  /**
   * System property that replaces {@link #DEFAULT_MAX_BATCH_SIZE} for consumers that do not call {@link Builder#maxBatchSize},
   * for example {@code -Didem.maxBatchSize=1} to run an application (or a test suite) without batching: {@value}.
   */
  public static final String MAX_BATCH_SIZE_PROPERTY = "idem.maxBatchSize";
  /** Default ordering: {@link Ordering#BY_KEY}. */
  public static final Ordering DEFAULT_ORDERING = Ordering.BY_KEY;
  /** Default longest accepted message id, in characters: {@value}. */
  public static final int DEFAULT_MAX_ID_LENGTH = 255;
  /** Default longest time one transaction attempt may take: 60 s. */
  public static final Duration DEFAULT_TRANSACTION_TIMEOUT = Duration.ofSeconds(60);

  /**
   * Default time a per-message {@link Handler} may run inside a micro-batch before its message is
   * detached from the batch (which then commits without it) and continues on its own: 2 s. Above
   * PostgreSQL's default {@code deadlock_timeout} (1 s), so that a handler waiting in a deadlock
   * gets the database's verdict, and the deadlock recovery, before it is detached.
   */
  public static final Duration DEFAULT_SLOW_MESSAGE_THRESHOLD = Duration.ofSeconds(2);

  /** Default interval at which a message that waits for infrastructure is logged again at WARN: 1 min. */
  public static final Duration DEFAULT_STUCK_WARNING_INTERVAL = Duration.ofMinutes(1);

  private static final Logger log = LoggerFactory.getLogger(IdempotentConsumer.class);

  private final ConsumerSettings<T> settings;
  private final Pipeline<T> pipeline;

  private IdempotentConsumer(Builder<T> b) {
    TransactionRunner transactions = b.transactions != null
        ? b.transactions
        : new R2dbcTransactionRunner(Objects.requireNonNull(b.inbox).connectionFactory(),
            b.serverTimeouts != null ? b.serverTimeouts : ServerTimeouts.derivedFrom(b.transactionTimeout), b.concurrency);
    this.settings = new ConsumerSettings<>(b.name, Objects.requireNonNull(b.inbox), b.handler, b.batchHandler, transactions,
        b.retryPolicy,
        b.classifier, b.maxIdLength, b.metrics, b.transactionTimeout, b.stuckWarningInterval, b.slowMessageThreshold,
        new MessageObservations(b.observationRegistry, b.name), b.maxBatchSize, b.batchMaxWait, b.concurrency, b.prefetch,
        b.ordering);
    this.pipeline = new Pipeline<>(settings);
  }

  /**
   * Starts a builder.
   *
   * @param consumer the consumer name, part of the dedup key; not blank, at most 255 characters
   * @param <T> the payload type
   * @return a builder
   */
  public static <T> Builder<T> named(String consumer) {
    return new Builder<>(consumer);
  }

  /**
   * Processes a stream of deliveries. Nothing happens until the result is subscribed; cancelling
   * it stops consumption (see the class documentation for what happens to messages in flight).
   * Errors of the source propagate; per-message errors never do.
   *
   * @param source the deliveries, usually from a broker adapter
   * @return one outcome per settled message, emitted after settlement
   */
  public Flux<Outcome<T>> process(Publisher<? extends Delivery<T>> source) {
    return pipeline.process(source);
  }

  /**
   * Processes a stream of deliveries, like {@link #process(Publisher)}, until {@code shutdown}
   * stops it gracefully: from {@link GracefulShutdown#stop(Duration)} on no message starts, the
   * messages in flight get the grace period to commit and settle while the source stays open,
   * what is left is then cancelled (rolled back, unacknowledged), and the returned {@code Flux}
   * completes normally, cancelling the source. Works with and without batching; a message
   * waiting in a retry backoff that ends after the grace period is abandoned at once (see
   * {@link GracefulShutdown}).
   * A subscription made after the stop began completes at once without subscribing to the source.
   *
   * @param source the deliveries, usually from a broker adapter
   * @param shutdown the handle that stops the stream; may govern several streams
   * @return one outcome per settled message, emitted after settlement; completes after a stop
   */
  public Flux<Outcome<T>> process(Publisher<? extends Delivery<T>> source, GracefulShutdown shutdown) {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(shutdown, "shutdown");
    return Flux.defer(() -> {
      StopControl control = shutdown.attach(settings.name(), item -> settings.metrics().abandoned((Delivery<?>) item));
      return control == null ? Flux.<Outcome<T>>empty() : pipeline.process(source, control);
    });
  }

  /**
   * The consumer name.
   *
   * @return the name
   */
  public String name() {
    return settings.name();
  }

  @Override
  public String toString() {
    return "IdempotentConsumer[name=" + settings.name() + ", inbox=" + settings.inbox() + ", concurrency="
        + settings.concurrency()
        + ", prefetch=" + settings.prefetch() + ", maxBatchSize=" + settings.maxBatchSize() + ", ordering=" + settings.ordering()
        + ", slowMessageThreshold=" + settings.slowMessageThreshold() + ", retry=" + settings.retryPolicy() + "]";
  }

  /**
   * Configures an {@link IdempotentConsumer}. Setters refuse {@code null} and the durations and
   * names that can never be valid, naming the setting; {@link #build()} checks the numeric ranges
   * ({@code concurrency}, {@code prefetch}, {@code maxBatchSize}, {@code maxIdLength}) and that the
   * required settings are present.
   *
   * @param <T> the payload type
   */
  public static final class Builder<T> {
    private final String name;
    private @Nullable PostgresInbox inbox;
    private @Nullable Handler<T> handler;
    private @Nullable BatchHandler<T> batchHandler;
    private int maxBatchSize = BatchSizeDefault.fromSystemProperty();
    private Duration batchMaxWait = DEFAULT_BATCH_MAX_WAIT;
    private @Nullable TransactionRunner transactions;
    private int concurrency = DEFAULT_CONCURRENCY;
    private int prefetch = DEFAULT_PREFETCH;
    private Ordering ordering = DEFAULT_ORDERING;
    private RetryPolicy retryPolicy = RetryPolicy.defaults();
    private ErrorClassifier classifier = ErrorClassifier.defaults();
    private int maxIdLength = DEFAULT_MAX_ID_LENGTH;
    private ConsumerMetrics metrics = ConsumerMetrics.NONE;
    private Duration transactionTimeout = DEFAULT_TRANSACTION_TIMEOUT;
    private @Nullable ServerTimeouts serverTimeouts;
    private Duration stuckWarningInterval = DEFAULT_STUCK_WARNING_INTERVAL;
    private Duration slowMessageThreshold = DEFAULT_SLOW_MESSAGE_THRESHOLD;
    private ObservationRegistry observationRegistry = ObservationRegistry.NOOP;

    private Builder(String name) {
      this.name = name;
    }

    /**
     * The inbox table that records processed ids. Required.
     *
     * @param inbox the inbox
     * @return this builder
     */
    public Builder<T> inbox(PostgresInbox inbox) {
      this.inbox = Objects.requireNonNull(inbox, "inbox");
      return this;
    }

    /**
     * The business effect. Required.
     *
     * @param handler the handler
     * @return this builder
     */
    public Builder<T> handler(Handler<T> handler) {
      this.handler = Objects.requireNonNull(handler, "handler");
      return this;
    }

    /**
     * A set-based business effect that receives the new messages of a micro-batch at once;
     * instead of {@link #handler}. With batching off it is called with one message at a time.
     *
     * @param batchHandler the batch handler
     * @return this builder
     */
    public Builder<T> batchHandler(BatchHandler<T> batchHandler) {
      this.batchHandler = Objects.requireNonNull(batchHandler, "batchHandler");
      return this;
    }

    /**
     * Micro-batching: up to {@code maxBatchSize} messages share one transaction (one multi-row
     * dedup insert, the handler for each new message, one COMMIT, then their acknowledgements).
     * Messages are spread over {@link #concurrency} lanes (by ordering key or partition, so
     * per-key order holds within and across batches; {@link Ordering#UNORDERED} to the shortest
     * lane); each lane runs one batch at a time and its next batch takes what queued meanwhile,
     * so batches grow with the load and never wait at low load. {@link #prefetch} bounds the
     * messages buffered and in flight (and so the batch sizes, about {@code prefetch /
     * concurrency} per lane), {@code concurrency} the transactions. A message whose batch failed
     * because of it is retried off its lane: the later messages of its key wait for it, the
     * other keys of the lane go on, and a message whose handler runs past the
     * {@link #slowMessageThreshold} is detached the same way. Default
     * {@value IdempotentConsumer#DEFAULT_MAX_BATCH_SIZE} (or the system property
     * {@value IdempotentConsumer#MAX_BATCH_SIZE_PROPERTY}); 1 processes each message in a
     * transaction of its own.
     *
     * @param maxBatchSize at least 1; 1 turns batching off
     * @return this builder
     */
    public Builder<T> maxBatchSize(int maxBatchSize) {
      this.maxBatchSize = maxBatchSize;
      return this;
    }

    /**
     * How long an idle batch lane waits for more messages before it starts a batch. Zero (the
     * default) starts at once with what is there: lowest latency. A few milliseconds make
     * batches larger at moderate load, at that cost in latency.
     *
     * @param batchMaxWait zero or positive
     * @return this builder
     */
    public Builder<T> batchMaxWait(Duration batchMaxWait) {
      Objects.requireNonNull(batchMaxWait, "batchMaxWait");
      if (batchMaxWait.isNegative()) {
        throw new IllegalArgumentException("batchMaxWait must not be negative, was " + batchMaxWait);
      }
      this.batchMaxWait = batchMaxWait;
      return this;
    }

    /**
     * Replaces the default transaction runner (plain R2DBC on the inbox's connection factory),
     * for example to join a framework's transaction management.
     *
     * @param transactions the runner
     * @return this builder
     */
    public Builder<T> transactionRunner(TransactionRunner transactions) {
      this.transactions = Objects.requireNonNull(transactions, "transactionRunner");
      return this;
    }

    /**
     * The in-flight limit: transactions that run at once (batch lanes), each of one message or of
     * a micro-batch of up to {@code maxBatchSize}. Keep it at most the connection pool's size. Default {@value IdempotentConsumer#DEFAULT_CONCURRENCY}.
     *
     * @param concurrency at least 1
     * @return this builder
     */
    public Builder<T> concurrency(int concurrency) {
      this.concurrency = concurrency;
      return this;
    }

    /**
     * How many messages are requested from the source ahead of processing. Small values protect
     * downstream systems and leave less unacknowledged work after a crash; large values smooth
     * throughput. Default {@value IdempotentConsumer#DEFAULT_PREFETCH}.
     *
     * @param prefetch at least 1
     * @return this builder
     */
    public Builder<T> prefetch(int prefetch) {
      this.prefetch = prefetch;
      return this;
    }

    /**
     * Which messages may overlap. Default {@link Ordering#BY_KEY}.
     *
     * @param ordering the mode
     * @return this builder
     */
    public Builder<T> ordering(Ordering ordering) {
      this.ordering = Objects.requireNonNull(ordering, "ordering");
      return this;
    }

    /**
     * Retry attempts and backoff. Default {@link RetryPolicy#defaults()}.
     *
     * @param retryPolicy the policy
     * @return this builder
     */
    public Builder<T> retry(RetryPolicy retryPolicy) {
      this.retryPolicy = Objects.requireNonNull(retryPolicy, "retry");
      return this;
    }

    /**
     * How errors are classified; {@code null} answers fall back to
     * {@link ErrorClassifier#defaults()}. Default: the defaults alone.
     *
     * @param classifier the classifier
     * @return this builder
     */
    public Builder<T> errorClassifier(ErrorClassifier classifier) {
      this.classifier = Objects.requireNonNull(classifier, "errorClassifier").orElse(ErrorClassifier.defaults());
      return this;
    }

    /**
     * The longest accepted message id; longer ids are dead-lettered as invalid. Default
     * {@value IdempotentConsumer#DEFAULT_MAX_ID_LENGTH}.
     *
     * @param maxIdLength at least 1
     * @return this builder
     */
    public Builder<T> maxIdLength(int maxIdLength) {
      this.maxIdLength = maxIdLength;
      return this;
    }

    /**
     * Where the pipeline reports its work. Default {@link ConsumerMetrics#NONE}.
     *
     * @param metrics the metrics sink
     * @return this builder
     */
    public Builder<T> metrics(ConsumerMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics, "metrics");
      return this;
    }

    /**
     * The longest time one transaction attempt (connection, dedup insert, handler, commit) may
     * take. An attempt that takes longer is cancelled and rolled back, and counts as an
     * infrastructure failure: a hung database or a lock held elsewhere must not stall a slot
     * forever. Default 60 s.
     *
     * @param transactionTimeout positive
     * @return this builder
     */
    public Builder<T> transactionTimeout(Duration transactionTimeout) {
      Objects.requireNonNull(transactionTimeout, "transactionTimeout");
      if (transactionTimeout.isNegative() || transactionTimeout.isZero()) {
        throw new IllegalArgumentException("transactionTimeout must be positive, was " + transactionTimeout);
      }
      this.transactionTimeout = transactionTimeout;
      return this;
    }

    /**
     * Server-side guards set at the start of every transaction of the default transaction
     * runner ({@code statement_timeout}, {@code lock_timeout},
     * {@code idle_in_transaction_session_timeout}); ignored with a custom
     * {@link #transactionRunner}. Default {@link ServerTimeouts#derivedFrom(Duration)} of the
     * {@link #transactionTimeout}; {@link ServerTimeouts#none()} turns them off.
     *
     * @param serverTimeouts the guards
     * @return this builder
     */
    public Builder<T> serverTimeouts(ServerTimeouts serverTimeouts) {
      this.serverTimeouts = Objects.requireNonNull(serverTimeouts, "serverTimeouts");
      return this;
    }

    /**
     * How long a per-message {@link Handler} may run inside a micro-batch before its message is
     * detached: the batch's transaction attempt is cancelled (rolled back), the messages before
     * it run again and commit without it, the ones after it go on, and the slow message runs
     * again at once on its own, off its lane (the later messages of its key wait for it, in
     * order; other keys go on), with no threshold and without counting a failure. So a slow
     * message holds back the others of its batch and lane for at most about this long (plus the
     * rollback), at the cost of running its handler a second time. A {@link BatchHandler} is not
     * watched (it runs for many messages at once; the {@code transactionTimeout} bounds it), and
     * a threshold at least the {@code transactionTimeout} turns detaching off. Without batching
     * ({@code maxBatchSize(1)}) it does not apply: a message never waits for another's handler.
     * Default 2 s ({@link IdempotentConsumer#DEFAULT_SLOW_MESSAGE_THRESHOLD}), above PostgreSQL's
     * default {@code deadlock_timeout} of 1 s: a handler that waits in a deadlock gets the
     * database's verdict, and the deadlock recovery, first.
     *
     * @param threshold positive
     * @return this builder
     */
    public Builder<T> slowMessageThreshold(Duration threshold) {
      Objects.requireNonNull(threshold, "slowMessageThreshold");
      if (threshold.isNegative() || threshold.isZero()) {
        throw new IllegalArgumentException("slowMessageThreshold must be positive, was " + threshold);
      }
      this.slowMessageThreshold = threshold;
      return this;
    }

    /**
     * How often a message that waits for broken infrastructure (the database, a dead-letter
     * destination) is logged again at WARN while the outage lasts, with how long it has waited, so
     * that an operator sees what holds a slot (and on Kafka a partition's commits); the first failure
     * is always logged at WARN. Default
     * {@link IdempotentConsumer#DEFAULT_STUCK_WARNING_INTERVAL} (1 min).
     *
     * @param interval positive
     * @return this builder
     */
    public Builder<T> stuckWarningInterval(Duration interval) {
      Objects.requireNonNull(interval, "stuckWarningInterval");
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("stuckWarningInterval must be positive, was " + interval);
      }
      this.stuckWarningInterval = interval;
      return this;
    }

    /**
     * Where the pipeline records Micrometer observations (traces, with a tracing bridge): one
     * {@value IdemObservations#MESSAGE} per message, continuing the trace of the message's W3C
     * {@code traceparent} header, with {@value IdemObservations#TRANSACTION} and
     * {@value IdemObservations#SETTLE} inside (see {@link IdemObservations}). Default
     * {@link ObservationRegistry#NOOP}: nothing is recorded and no observation is created.
     *
     * @param observationRegistry the registry
     * @return this builder
     */
    public Builder<T> observationRegistry(ObservationRegistry observationRegistry) {
      this.observationRegistry = Objects.requireNonNull(observationRegistry, "observationRegistry");
      return this;
    }

    /**
     * Validates the settings and builds the consumer.
     *
     * @return the consumer
     * @throws IllegalArgumentException naming the setting that is missing or invalid
     */
    public IdempotentConsumer<T> build() {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("consumer name must not be blank");
      }
      if (name.length() > 255 || name.chars().anyMatch(Character::isISOControl)) {
        throw new IllegalArgumentException(
            "consumer name must be at most 255 characters without control characters, was: " + name);
      }
      if (inbox == null) {
        throw new IllegalArgumentException("inbox is required (for example PostgresInbox.create(connectionFactory))");
      }
      if (handler == null && batchHandler == null) {
        throw new IllegalArgumentException("handler is required (or batchHandler)");
      }
      if (handler != null && batchHandler != null) {
        throw new IllegalArgumentException("set either handler or batchHandler, not both");
      }
      if (maxBatchSize < 1) {
        throw new IllegalArgumentException("maxBatchSize must be at least 1, was " + maxBatchSize);
      }
      if (concurrency < 1) {
        throw new IllegalArgumentException("concurrency must be at least 1, was " + concurrency);
      }
      if (prefetch < 1) {
        throw new IllegalArgumentException("prefetch must be at least 1, was " + prefetch);
      }
      if (maxIdLength < 1) {
        throw new IllegalArgumentException("maxIdLength must be at least 1, was " + maxIdLength);
      }
      warnIfPoolSmallerThanConcurrency();
      return new IdempotentConsumer<>(this);
    }

    private void warnIfPoolSmallerThanConcurrency() {
      if (transactions == null
          && Objects.requireNonNull(inbox).connectionFactory() instanceof io.r2dbc.pool.ConnectionPool pool) {
        pool.getMetrics().ifPresent(poolMetrics -> {
          if (poolMetrics.getMaxAllocatedSize() < concurrency) {
            log.warn("Consumer '{}': concurrency {} exceeds the connection pool's maximum size {}; "
                + "messages will wait for connections. Size the pool at least to the concurrency.",
                name, concurrency, poolMetrics.getMaxAllocatedSize());
          }
        });
      }
    }
  }
}
