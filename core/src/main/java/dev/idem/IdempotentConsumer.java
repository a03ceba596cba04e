package dev.idem;

import dev.idem.internal.KeyedLanes;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.TxHandle;
import dev.idem.postgres.PostgresInbox;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

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
 *       Retryable errors are retried per the {@link RetryPolicy}, then dead-lettered;
 *       non-retryable errors and bad input (missing or over-long id, missing or undecodable
 *       payload) are dead-lettered at once; infrastructure errors are retried without limit and
 *       never dead-lettered or acknowledged. Errors of the transaction itself (connection,
 *       BEGIN, dedup insert, COMMIT, the {@code transactionTimeout}) count as infrastructure:
 *       they are never the message's fault.</li>
 *   <li><b>Bounded.</b> At most {@code prefetch} messages wait in the buffer and at most
 *       {@code concurrency} are in flight; demand, not memory, absorbs a backlog.</li>
 *   <li><b>Ordered</b> per the {@link Ordering} mode.</li>
 *   <li><b>Cancellation</b> of the returned {@code Flux} stops taking messages and rolls back
 *       transactions in flight; those messages stay unacknowledged and are redelivered.</li>
 * </ul>
 *
 * <p>Instances are immutable and thread-safe; {@link #process} may be called for several sources.
 *
 * @param <T> the payload type
 */
public final class IdempotentConsumer<T> {

  /** Default in-flight limit: {@value}. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /** Default buffer of messages requested ahead of processing: {@value}. */
  public static final int DEFAULT_PREFETCH = 32;
  /** Default ordering: {@link Ordering#BY_KEY}. */
  public static final Ordering DEFAULT_ORDERING = Ordering.BY_KEY;
  /** Default longest accepted message id, in characters: {@value}. */
  public static final int DEFAULT_MAX_ID_LENGTH = 255;
  /** Default longest time one transaction attempt may take: 60 s. */
  public static final Duration DEFAULT_TRANSACTION_TIMEOUT = Duration.ofSeconds(60);

  private static final Logger log = LoggerFactory.getLogger(IdempotentConsumer.class);

  private final String name;
  private final PostgresInbox inbox;
  private final Handler<T> handler;
  private final TransactionRunner transactions;
  private final int concurrency;
  private final int prefetch;
  private final Ordering ordering;
  private final RetryPolicy retryPolicy;
  private final ErrorClassifier classifier;
  private final int maxIdLength;
  private final ConsumerMetrics metrics;
  private final Duration transactionTimeout;

  private IdempotentConsumer(Builder<T> b) {
    this.name = b.name;
    this.inbox = b.inbox;
    this.handler = b.handler;
    this.transactions = b.transactions != null ? b.transactions : new R2dbcTransactionRunner(b.inbox.connectionFactory());
    this.concurrency = b.concurrency;
    this.prefetch = b.prefetch;
    this.ordering = b.ordering;
    this.retryPolicy = b.retryPolicy;
    this.classifier = b.classifier;
    this.maxIdLength = b.maxIdLength;
    this.metrics = b.metrics;
    this.transactionTimeout = b.transactionTimeout;
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
    Flux<Delivery<T>> buffered = Flux.<Delivery<T>>from(source)
        .doOnNext(metrics::received)
        .limitRate(prefetch);
    Flux<Outcome<T>> outcomes;
    if (ordering == Ordering.UNORDERED) {
      outcomes = buffered.flatMap(this::handle, concurrency, 1);
    } else {
      KeyedLanes lanes = new KeyedLanes();
      outcomes = buffered.flatMap(d -> lanes.run(laneKey(d), handle(d)), concurrency, 1);
    }
    return outcomes.doOnDiscard(Delivery.class, metrics::abandoned);
  }

  private String laneKey(Delivery<T> delivery) {
    try {
      return ordering == Ordering.BY_KEY ? delivery.orderingKey() : delivery.partition();
    } catch (RuntimeException e) {
      // A delivery that cannot say its key is not ordered; validate() decides whether it is processable.
      return null;
    }
  }

  /** One message, from validation to settlement. */
  private Mono<Outcome<T>> handle(Delivery<T> delivery) {
    return Mono.defer(() -> {
      metrics.started(delivery);
      DeadLetter rejection = validate(delivery);
      if (rejection != null) {
        return deadLetter(delivery, rejection);
      }
      AtomicInteger attempts = new AtomicInteger();
      AtomicInteger retryableFailures = new AtomicInteger();
      return Mono.defer(() -> attemptOnce(delivery, attempts.incrementAndGet()))
          .retryWhen(messageRetry(delivery, retryableFailures))
          .retryWhen(infrastructureRetry(delivery))
          .flatMap(inserted -> ack(delivery, inserted ? Outcome.Status.PROCESSED : Outcome.Status.DUPLICATE, attempts.get()))
          .onErrorResume(error -> deadLetter(delivery, deadLetterFor(error, attempts.get())))
          .doOnCancel(() -> metrics.abandoned(delivery));
    });
  }

  /**
   * One transaction: the dedup row, then the handler if the row is new. Errors of the handler
   * arrive wrapped in {@link HandlerFailure}; any other error came from the transaction itself
   * (acquiring a connection, BEGIN, the inbox insert, COMMIT, the timeout).
   */
  private Mono<Boolean> attemptOnce(Delivery<T> delivery, int attempt) {
    long start = System.nanoTime();
    return transactions.inTransaction(connection -> inbox.record(connection, name, delivery.id())
            .flatMap(inserted -> inserted ? runHandler(delivery, new TxHandle(connection, delivery.id(), name)) : Mono.just(false)))
        .timeout(transactionTimeout)
        .doOnSuccess(inserted -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), true))
        .doOnError(error -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), false));
  }

  private Mono<Boolean> runHandler(Delivery<T> delivery, TxHandle tx) {
    long start = System.nanoTime();
    return Mono.defer(() -> Flux.from(Objects.requireNonNull(handler.handle(delivery.payload(), tx), "handler returned null")).then())
        .doOnSuccess(ignored -> metrics.handler(delivery, Duration.ofNanos(System.nanoTime() - start)))
        .onErrorMap(HandlerFailure::new)
        .thenReturn(true);
  }

  /**
   * Retries retryable failures until {@code maxAttempts} of them happened for this delivery; the
   * count survives the resubscriptions of the infrastructure retry around it, so alternating
   * failure kinds cannot keep a message alive forever.
   */
  private Retry messageRetry(Delivery<T> delivery, AtomicInteger retryableFailures) {
    return Retry.backoff(Long.MAX_VALUE, retryPolicy.firstBackoff())
        .maxBackoff(retryPolicy.maxBackoff())
        .filter(error -> kindOf(error) == ErrorKind.RETRYABLE && retryableFailures.incrementAndGet() < retryPolicy.maxAttempts())
        .doBeforeRetry(signal -> metrics.retrying(delivery, cause(signal.failure()), ErrorKind.RETRYABLE));
  }

  private Retry infrastructureRetry(Delivery<T> delivery) {
    return Retry.backoff(Long.MAX_VALUE, retryPolicy.infrastructureBackoff())
        .maxBackoff(retryPolicy.infrastructureMaxBackoff())
        .filter(error -> kindOf(error) == ErrorKind.INFRASTRUCTURE)
        .doBeforeRetry(signal -> {
          metrics.retrying(delivery, cause(signal.failure()), ErrorKind.INFRASTRUCTURE);
          if (signal.totalRetriesInARow() == 0) {
            log.warn("Consumer '{}': infrastructure unavailable while processing message '{}'; backing off and retrying until it is back: {}",
                name, idForLogs(delivery), cause(signal.failure()).toString());
          } else {
            log.debug("Consumer '{}': still waiting for infrastructure for message '{}' (retry {}): {}",
                name, idForLogs(delivery), signal.totalRetriesInARow() + 1, cause(signal.failure()).toString());
          }
        });
  }

  /**
   * The handler's errors are classified as they are. An error of the transaction itself is not
   * the message's fault (a refused connection, a closed pool, a missing inbox table, a read-only
   * server, a timeout): unless the classifier calls it non-retryable, or it is about the data
   * (SQLSTATE class 22, data exception, or 23, an integrity violation at COMMIT of a deferred
   * constraint the handler's writes broke), it is infrastructure.
   */
  private ErrorKind kindOf(Throwable error) {
    if (error instanceof HandlerFailure failure) {
      return classify(failure.getCause());
    }
    ErrorKind kind = classify(error);
    String sqlState = error instanceof io.r2dbc.spi.R2dbcException r2dbc ? r2dbc.getSqlState() : null;
    boolean messageData = sqlState != null && (sqlState.startsWith("22") || sqlState.startsWith("23"));
    return kind == ErrorKind.RETRYABLE && !messageData ? ErrorKind.INFRASTRUCTURE : kind;
  }

  private ErrorKind classify(Throwable error) {
    ErrorKind kind = classifier.classify(error);
    return kind != null ? kind : ErrorKind.RETRYABLE;
  }

  private static Throwable cause(Throwable error) {
    return error instanceof HandlerFailure ? error.getCause() : error;
  }

  private DeadLetter deadLetterFor(Throwable error, int attempts) {
    DeadLetterReason reason = kindOf(error) == ErrorKind.RETRYABLE ? DeadLetterReason.RETRIES_EXHAUSTED : DeadLetterReason.NON_RETRYABLE_ERROR;
    return DeadLetter.of(reason, cause(error), name, attempts);
  }

  private DeadLetter validate(Delivery<T> delivery) {
    try {
      return check(delivery);
    } catch (RuntimeException e) {
      // The delivery could not say what it is (its id, payload or decoding state threw).
      return DeadLetter.of(DeadLetterReason.INVALID_ID, e, name, 0);
    }
  }

  private DeadLetter check(Delivery<T> delivery) {
    String id = delivery.id();
    if (id == null || id.isBlank()) {
      return DeadLetter.rejected(DeadLetterReason.MISSING_ID, id == null ? "id is null" : "id is blank", name);
    }
    if (id.indexOf('\0') >= 0) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID, "id contains a NUL character, which PostgreSQL text cannot store", name);
    }
    if (id.length() > maxIdLength) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID,
          "id has " + id.length() + " characters, more than the maximum of " + maxIdLength, name);
    }
    Throwable decodingFailure = delivery.decodingFailure();
    if (decodingFailure != null) {
      return DeadLetter.of(DeadLetterReason.UNDECODABLE_PAYLOAD, decodingFailure, name, 0);
    }
    if (delivery.payload() == null) {
      return DeadLetter.rejected(DeadLetterReason.MISSING_PAYLOAD, "payload is null", name);
    }
    return null;
  }

  private Mono<Outcome<T>> ack(Delivery<T> delivery, Outcome.Status status, int attempts) {
    return delivery.ack()
        .then(Mono.fromCallable(() -> settled(new Outcome<>(status, delivery, null, attempts))))
        .onErrorResume(error -> unsettled(delivery, "acknowledgement", error));
  }

  private Mono<Outcome<T>> deadLetter(Delivery<T> delivery, DeadLetter deadLetter) {
    return delivery.deadLetter(deadLetter)
        .retryWhen(Retry.backoff(Long.MAX_VALUE, retryPolicy.infrastructureBackoff())
            .maxBackoff(retryPolicy.infrastructureMaxBackoff())
            .filter(error -> kindOf(error) == ErrorKind.INFRASTRUCTURE))
        .then(Mono.fromCallable(() -> {
          log.warn("Consumer '{}' dead-lettered message '{}' after {} attempt(s): {}",
              name, idForLogs(delivery), deadLetter.attempts(), deadLetter.detail());
          return settled(new Outcome<>(Outcome.Status.DEAD_LETTERED, delivery, deadLetter, deadLetter.attempts()));
        }))
        .onErrorResume(error -> {
          log.error("Consumer '{}': the dead-letter publish of message '{}' failed for good ({}); the message stays "
              + "unacknowledged and is redelivered, and on Kafka its partition's commits wait for it. Fix the dead-letter "
              + "destination.", name, idForLogs(delivery), deadLetter.detail());
          return unsettled(delivery, "dead-letter publish", error);
        });
  }

  private static String idForLogs(Delivery<?> delivery) {
    try {
      return delivery.id();
    } catch (RuntimeException e) {
      return "<id unreadable: " + e.getMessage() + ">";
    }
  }

  private Outcome<T> settled(Outcome<T> outcome) {
    metrics.settled(outcome);
    return outcome;
  }

  private Mono<Outcome<T>> unsettled(Delivery<T> delivery, String step, Throwable error) {
    log.warn("Consumer '{}': {} of message '{}' failed; it stays unsettled and will be redelivered: {}",
        name, step, idForLogs(delivery), error.toString());
    metrics.abandoned(delivery);
    return Mono.empty();
  }

  /**
   * The consumer name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  @Override
  public String toString() {
    return "IdempotentConsumer[name=" + name + ", inbox=" + inbox + ", concurrency=" + concurrency
        + ", prefetch=" + prefetch + ", ordering=" + ordering + ", retry=" + retryPolicy + "]";
  }

  /** Marks an error as the handler's, so that it is told apart from errors of the transaction. */
  static final class HandlerFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    HandlerFailure(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }

  /**
   * Configures an {@link IdempotentConsumer}. Setters check their argument and name it in the
   * error; {@link #build()} checks that required settings are present.
   *
   * @param <T> the payload type
   */
  public static final class Builder<T> {
    private final String name;
    private PostgresInbox inbox;
    private Handler<T> handler;
    private TransactionRunner transactions;
    private int concurrency = DEFAULT_CONCURRENCY;
    private int prefetch = DEFAULT_PREFETCH;
    private Ordering ordering = DEFAULT_ORDERING;
    private RetryPolicy retryPolicy = RetryPolicy.defaults();
    private ErrorClassifier classifier = ErrorClassifier.defaults();
    private int maxIdLength = DEFAULT_MAX_ID_LENGTH;
    private ConsumerMetrics metrics = ConsumerMetrics.NONE;
    private Duration transactionTimeout = DEFAULT_TRANSACTION_TIMEOUT;

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
     * The in-flight limit: messages processed at once. Keep it at most the connection pool's
     * size. Default {@value IdempotentConsumer#DEFAULT_CONCURRENCY}.
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
        throw new IllegalArgumentException("consumer name must be at most 255 characters without control characters, was: " + name);
      }
      if (inbox == null) {
        throw new IllegalArgumentException("inbox is required (for example PostgresInbox.create(connectionFactory))");
      }
      if (handler == null) {
        throw new IllegalArgumentException("handler is required");
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
      if (transactions == null && inbox.connectionFactory() instanceof io.r2dbc.pool.ConnectionPool pool) {
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
