package dev.idem;

import dev.idem.internal.Backoff;
import dev.idem.internal.BatchLanes;
import dev.idem.internal.BatchTxHandle;
import dev.idem.internal.DriverBoundary;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.KeyedLanes;
import dev.idem.internal.LogText;
import dev.idem.internal.MessageObservations;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.StopControl;
import dev.idem.internal.TxHandle;
import dev.idem.postgres.PostgresInbox;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
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
 *       Errors have three origins, classified apart. <em>Handler</em> errors are the message's:
 *       retryable ones are retried per the {@link RetryPolicy}, then dead-lettered;
 *       non-retryable errors and bad input (missing, over-long or malformed id, missing or
 *       undecodable payload) are dead-lettered at once; contention (deadlock, serialization
 *       failure, lock timeout) is retried without spending attempts, up to a bound. A COMMIT
 *       refused after the handler ran (for example because the handler swallowed an SQL error)
 *       is the message's too. Errors of the <em>transaction</em> itself (connection, BEGIN,
 *       dedup insert, COMMIT, the {@code transactionTimeout}) are infrastructure: retried
 *       without limit, never dead-lettered or acknowledged, logged at WARN when they start and
 *       every {@code stuckWarningInterval} (default 1 min) while they last. <em>Settlement</em> (ack,
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
 *   <li><b>Bounded.</b> At most {@code prefetch} messages wait in the buffer and at most
 *       {@code concurrency} are in flight; demand, not memory, absorbs a backlog.</li>
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
 * <p>Instances are immutable and thread-safe; {@link #process} may be called for several sources.
 *
 * @param <T> the payload type
 */
public final class IdempotentConsumer<T> {

  /** Default in-flight limit: {@value}. */
  public static final int DEFAULT_CONCURRENCY = 8;
  /** Default buffer of messages requested ahead of processing: {@value}. */
  public static final int DEFAULT_PREFETCH = 32;
  /** Default largest micro-batch: {@value}; 1 turns batching off. */
  public static final int DEFAULT_MAX_BATCH_SIZE = 1;
  /** Default ordering: {@link Ordering#BY_KEY}. */
  public static final Ordering DEFAULT_ORDERING = Ordering.BY_KEY;
  /** Default longest accepted message id, in characters: {@value}. */
  public static final int DEFAULT_MAX_ID_LENGTH = 255;
  /** Default longest time one transaction attempt may take: 60 s. */
  public static final Duration DEFAULT_TRANSACTION_TIMEOUT = Duration.ofSeconds(60);

  /** Default interval at which a message that waits for infrastructure is logged again at WARN: 1 min. */
  public static final Duration DEFAULT_STUCK_WARNING_INTERVAL = Duration.ofMinutes(1);

  private static final Logger log = LoggerFactory.getLogger(IdempotentConsumer.class);

  private final String name;
  private final PostgresInbox inbox;
  private final Handler<T> handler;
  private final BatchHandler<T> batchHandler;
  private final int maxBatchSize;
  private final Duration batchMaxWait;
  private final TransactionRunner transactions;
  private final int concurrency;
  private final int prefetch;
  private final Ordering ordering;
  private final RetryPolicy retryPolicy;
  private final ErrorClassifier classifier;
  private final int maxIdLength;
  private final ConsumerMetrics metrics;
  private final Duration transactionTimeout;
  private final Duration stuckWarningInterval;
  private final MessageObservations observations;

  private IdempotentConsumer(Builder<T> b) {
    this.name = b.name;
    this.inbox = b.inbox;
    this.handler = b.handler;
    this.batchHandler = b.batchHandler;
    this.maxBatchSize = b.maxBatchSize;
    this.batchMaxWait = b.batchMaxWait;
    this.transactions = b.transactions != null ? b.transactions
        : new R2dbcTransactionRunner(b.inbox.connectionFactory(),
            b.serverTimeouts != null ? b.serverTimeouts : ServerTimeouts.derivedFrom(b.transactionTimeout), b.concurrency);
    this.concurrency = b.concurrency;
    this.prefetch = b.prefetch;
    this.ordering = b.ordering;
    this.retryPolicy = b.retryPolicy;
    this.classifier = b.classifier;
    this.maxIdLength = b.maxIdLength;
    this.metrics = b.metrics;
    this.transactionTimeout = b.transactionTimeout;
    this.stuckWarningInterval = b.stuckWarningInterval;
    this.observations = new MessageObservations(b.observationRegistry, b.name);
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
    Flux<Delivery<T>> received = Flux.<Delivery<T>>from(source).doOnNext(metrics::received);
    Flux<Outcome<T>> outcomes;
    if (maxBatchSize > 1) {
      // The flatMap's demand alone bounds the messages buffered and in flight to the prefetch.
      outcomes = Flux.using(
          () -> new BatchLanes<Delivery<T>, Outcome<T>>(concurrency, maxBatchSize, batchMaxWait,
              d -> ordering == Ordering.UNORDERED ? null : laneKey(d), this::processBatch, Outcome::delivery, metrics::abandoned),
          lanes -> received.flatMap(lanes::submit, prefetch, 1),
          BatchLanes::dispose);
      return outcomes.doOnDiscard(Delivery.class, metrics::abandoned);
    }
    Flux<Delivery<T>> buffered = received.limitRate(prefetch);
    if (ordering == Ordering.UNORDERED) {
      outcomes = buffered.flatMap(this::handle, concurrency, 1);
    } else {
      KeyedLanes lanes = new KeyedLanes();
      outcomes = buffered.flatMap(d -> lanes.run(laneKey(d), handle(d)), concurrency, 1);
    }
    return outcomes.doOnDiscard(Delivery.class, metrics::abandoned);
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
      StopControl control = shutdown.attach(name, item -> metrics.abandoned((Delivery<?>) item));
      if (control == null) {
        return Flux.empty();
      }
      // Mirrors process(source), with the stop's gate in front of the source and around each start.
      Flux<Delivery<T>> received = control.<Delivery<T>>gate(source).doOnNext(metrics::received);
      Flux<Outcome<T>> outcomes;
      if (maxBatchSize > 1) {
        outcomes = Flux.using(
            () -> new BatchLanes<Delivery<T>, Outcome<T>>(concurrency, maxBatchSize, batchMaxWait,
                d -> ordering == Ordering.UNORDERED ? null : laneKey(d),
                (batch, lane) -> control.runBatch(batch, () -> processBatch(batch, control.tracking(lane))), Outcome::delivery, metrics::abandoned),
            lanes -> received.flatMap(lanes::submit, prefetch, 1),
            BatchLanes::dispose);
      } else {
        Flux<Delivery<T>> buffered = received.limitRate(prefetch);
        if (ordering == Ordering.UNORDERED) {
          outcomes = buffered.flatMap(d -> control.run(d, handle(d)), concurrency, 1);
        } else {
          KeyedLanes lanes = new KeyedLanes();
          outcomes = buffered.flatMap(d -> lanes.run(laneKey(d), control.run(d, handle(d))), concurrency, 1);
        }
      }
      return control.untilStopped(outcomes.doOnDiscard(Delivery.class, metrics::abandoned));
    });
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
    return observations.message(delivery, Mono.defer(() -> {
      metrics.started(delivery);
      DeadLetter rejection = validate(delivery);
      if (rejection != null) {
        return deadLetter(delivery, rejection);
      }
      return attempt(delivery, new Attempts(delivery), Mono.empty());
    }), outcome -> outcome.status().name());
  }

  /**
   * The failing message of a split batch, alone: its failed batch attempt counts as its first.
   * When the batch was this message alone, its attempts so far are its own and carry on
   * ({@code alone}), so that a batch of one counts attempts as a message without batching does.
   */
  private Mono<Outcome<T>> handleAfterBatchFailure(Delivery<T> delivery, Throwable batchFailure, Attempts alone) {
    return Mono.defer(() -> {
      Attempts attempts = alone != null ? alone : new Attempts(delivery);
      if (alone == null) {
        attempts.next();
      }
      return attempt(delivery, attempts, attempts.backoffOrGiveUp(batchFailure));
    });
  }

  /** Attempts with retries after {@code before}, then the settlement: ack, dead letter, or a fatal error. */
  private Mono<Outcome<T>> attempt(Delivery<T> delivery, Attempts attempts, Mono<?> before) {
    return before.then(Mono.defer(() -> {
              int attempt = attempts.next();
              return observations.child(IdemObservations.TRANSACTION, attempt, attemptOnce(delivery, attempt));
            })
            .retryWhen(Retry.from(signals -> signals.concatMap(signal -> attempts.backoffOrGiveUp(signal.failure())))))
        .flatMap(inserted -> observations.child(IdemObservations.SETTLE, 0,
            ack(delivery, inserted ? Outcome.Status.PROCESSED : Outcome.Status.DUPLICATE, attempts.count())))
        .onErrorResume(error -> !isFatal(error),
            error -> observations.child(IdemObservations.SETTLE, 0, deadLetter(delivery, deadLetterFor(error, attempts.count()))))
        .onErrorMap(IdempotentConsumer::surfaced)
        .doOnError(fatal -> {
          log.error("Consumer '{}': a JVM error while processing message '{}'; the message stays unacknowledged and "
              + "the stream terminates with the error so that the application (or its supervisor) can restart: {}",
              name, idForLogs(delivery), LogText.cut(fatal.toString()));
          metrics.abandoned(delivery);
        })
        .doOnCancel(() -> metrics.abandoned(delivery));
  }

  /**
   * One micro-batch of one lane, in order: each run of valid deliveries shares a transaction;
   * a delivery that fails validation is dead-lettered where it stands.
   */
  private Flux<Outcome<T>> processBatch(List<Delivery<T>> batch, BatchLanes.LaneControl<Delivery<T>, Outcome<T>> lane) {
    return observations.isOn() ? observations.batch(batch, batchParts(batch, lane), Outcome::delivery, o -> o.status().name())
        : batchParts(batch, lane);
  }

  /** {@link #processBatch} without observations. */
  private Flux<Outcome<T>> batchParts(List<Delivery<T>> batch, BatchLanes.LaneControl<Delivery<T>, Outcome<T>> lane) {
    List<Flux<Outcome<T>>> parts = new ArrayList<>();
    List<Delivery<T>> run = new ArrayList<>();
    for (Delivery<T> delivery : batch) {
      metrics.started(delivery);
      DeadLetter rejection = validate(delivery);
      if (rejection == null) {
        run.add(delivery);
        continue;
      }
      if (!run.isEmpty()) {
        parts.add(batchRun(List.copyOf(run), lane));
        run.clear();
      }
      parts.add(deadLetter(delivery, rejection).flux());
    }
    if (!run.isEmpty()) {
      parts.add(batchRun(List.copyOf(run), lane));
    }
    return parts.size() == 1 ? parts.get(0) : Flux.concat(parts);
  }

  /**
   * Valid deliveries in one transaction: one multi-row dedup insert, the handler for each new
   * one, one COMMIT, then the acknowledgements in order. Deliveries whose key waits for a
   * message that runs off the lane are left to a later batch of the lane. Infrastructure
   * failures and contention retry the whole batch; a failure of the message's kind splits it
   * (at the failing message when it is known, else in halves): the others commit, and the
   * failing one is retried and dead-lettered on its own, off the lane, while the later messages
   * of its key wait for it and those of other keys go on.
   */
  private Flux<Outcome<T>> batchRun(List<Delivery<T>> candidates, BatchLanes.LaneControl<Delivery<T>, Outcome<T>> lane) {
    return Flux.defer(() -> {
      List<Delivery<T>> run = lane.admit(candidates);
      if (run.isEmpty()) {
        return Flux.empty();
      }
      Attempts attempts = new Attempts(run.get(0));
      // On cancellation the messages that neither settled nor went on to a split's runs are abandoned.
      Set<Delivery<T>> settled = Collections.newSetFromMap(new java.util.concurrent.ConcurrentHashMap<>());
      AtomicBoolean splitting = new AtomicBoolean();
      return Mono.defer(() -> attemptBatch(run, attempts.next()))
          .retryWhen(Retry.from(signals -> signals.concatMap(signal -> attempts.backoffOrSplit(signal.failure()))))
          .flatMapMany(fresh -> Flux.fromIterable(run)
              .concatMap(d -> ack(d, fresh.contains(d) ? Outcome.Status.PROCESSED : Outcome.Status.DUPLICATE, attempts.count())
                  .doOnTerminate(() -> settled.add(d))))
          .doOnCancel(() -> {
            if (!splitting.get()) {
              run.stream().filter(d -> !settled.contains(d)).forEach(metrics::abandoned);
            }
          })
          .onErrorResume(BatchSplit.class, split -> {
            splitting.set(true);
            if (split.getCause() instanceof EffectTimeout && run.size() > 1) {
              log.warn("Consumer '{}': a batch of {} messages did not finish within the transactionTimeout of {} ms while {}; "
                  + "it is split: the others commit without {}, which is retried on its own",
                  name, run.size(), transactionTimeout.toMillis(),
                  split.index >= 0 ? "the handler of message '" + idForLogs(run.get(split.index)) + "' ran" : "the batch handler ran",
                  split.index >= 0 ? "it" : "the message that hangs (found by halving the batch)");
            }
            return split(run, split, lane, run.size() == 1 ? attempts : null);
          })
          .onErrorMap(IdempotentConsumer::surfaced)
          .doOnError(fatal -> {
            if (run.size() == 1) {
              log.error("Consumer '{}': a JVM error while processing message '{}'; the message stays unacknowledged and "
                  + "the stream terminates with the error so that the application (or its supervisor) can restart: {}",
                  name, idForLogs(run.get(0)), LogText.cut(fatal.toString()));
            } else {
              log.error("Consumer '{}': a JVM error while processing a batch of {} messages from '{}'; they stay unacknowledged and "
                  + "the stream terminates with the error: {}", name, run.size(), idForLogs(run.get(0)), LogText.cut(fatal.toString()));
            }
            run.forEach(metrics::abandoned);
          });
    });
  }

  /**
   * The messages before the failing one commit first; then the failing one goes off the lane to
   * be retried or dead-lettered alone, and the lane goes on with the messages after it.
   */
  private Flux<Outcome<T>> split(List<Delivery<T>> run, BatchSplit split, BatchLanes.LaneControl<Delivery<T>, Outcome<T>> lane,
      Attempts alone) {
    int failing = run.size() == 1 ? 0 : split.index;
    if (failing >= 0 && failing < run.size()) {
      Delivery<T> bad = run.get(failing);
      return Flux.concat(batchRun(run.subList(0, failing), lane), Flux.defer(() -> {
        lane.offLane(bad, handleAfterBatchFailure(bad, split.failure(), alone));
        return batchRun(run.subList(failing + 1, run.size()), lane);
      }));
    }
    int half = run.size() / 2;
    return Flux.concat(batchRun(run.subList(0, half), lane), batchRun(run.subList(half, run.size()), lane));
  }

  /**
   * One transaction of a batch. A {@code transactionTimeout} that strikes while the handlers run
   * is the running message's (or, for a {@link BatchHandler} of several messages, one of them):
   * it ends as an {@link EffectTimeout}, so that the batch splits instead of retrying as a unit.
   */
  private Mono<Set<Delivery<T>>> attemptBatch(List<Delivery<T>> run, int attempt) {
    long start = System.nanoTime();
    AtomicBoolean effectsDone = new AtomicBoolean();
    java.util.concurrent.atomic.AtomicInteger effectAt = new java.util.concurrent.atomic.AtomicInteger(EffectTimeout.NOT_IN_EFFECTS);
    List<String> ids = new ArrayList<>(run.size());
    run.forEach(d -> ids.add(d.id()));
    java.util.function.BiFunction<io.r2dbc.spi.Connection, Set<String>, Mono<Set<Delivery<T>>>> afterRecord = (connection, newIds) -> {
      Set<Delivery<T>> fresh = firstOccurrences(run, newIds);
      return applyEffects(run, fresh, connection, effectAt)
          .doOnSuccess(ok -> {
            effectAt.set(EffectTimeout.NOT_IN_EFFECTS);
            effectsDone.set(true);
          })
          .thenReturn(fresh);
    };
    Mono<Set<Delivery<T>>> transaction = transactions instanceof R2dbcTransactionRunner r2dbc
        // The default runner sends the dedup insert with BEGIN: one round trip less.
        ? r2dbc.inTransaction(connection -> inbox.recordAllPipelined(connection, name, ids), afterRecord)
        : transactions.inTransaction(connection -> inbox.recordAll(connection, name, ids)
            .flatMap(newIds -> afterRecord.apply(connection, newIds)));
    return transaction
        .timeout(transactionTimeout)
        .onErrorMap(error -> error instanceof java.util.concurrent.TimeoutException && effectAt.get() != EffectTimeout.NOT_IN_EFFECTS,
            error -> new EffectTimeout(error, effectAt.get()))
        .onErrorMap(error -> effectsDone.get() && !(error instanceof HandlerFailure) && CommitRejected.matches(error),
            CommitRejected::new)
        .doOnSuccess(fresh -> run.forEach(d -> metrics.transaction(d, Duration.ofNanos(System.nanoTime() - start), true)))
        .doOnError(error -> run.forEach(d -> metrics.transaction(d, Duration.ofNanos(System.nanoTime() - start), false)));
  }

  /** The deliveries whose id was newly recorded; of repeats inside the batch, the first. */
  private static <T> Set<Delivery<T>> firstOccurrences(List<Delivery<T>> run, Set<String> newIds) {
    Set<Delivery<T>> fresh = Collections.newSetFromMap(new IdentityHashMap<>());
    Set<String> claimed = new HashSet<>();
    for (Delivery<T> d : run) {
      if (newIds.contains(d.id()) && claimed.add(d.id())) {
        fresh.add(d);
      }
    }
    return fresh;
  }

  /**
   * The effects of a batch's new messages on its connection, in delivery order. {@code effectAt}
   * tells which message's effect runs: its index in {@code run}, or
   * {@link EffectTimeout#UNKNOWN} while a batch handler runs for several.
   */
  private Mono<Void> applyEffects(List<Delivery<T>> run, Set<Delivery<T>> fresh, io.r2dbc.spi.Connection connection,
      java.util.concurrent.atomic.AtomicInteger effectAt) {
    if (fresh.isEmpty()) {
      return Mono.empty();
    }
    if (batchHandler != null) {
      List<BatchItem<T>> items = new ArrayList<>(fresh.size());
      int only = EffectTimeout.UNKNOWN;
      for (int i = 0; i < run.size(); i++) {
        Delivery<T> d = run.get(i);
        if (fresh.contains(d)) {
          items.add(new BatchItem<>(d.id(), d.payload(), d));
          only = i;
        }
      }
      int index = items.size() == 1 ? only : EffectTimeout.UNKNOWN;
      long start = System.nanoTime();
      return guardedEffect(() -> {
        effectAt.set(index);
        return batchHandler.handle(items, new BatchTxHandle(connection, name));
      }, -1)
          .doOnSuccess(ok -> items.forEach(i -> metrics.handler(i.delivery(), Duration.ofNanos(System.nanoTime() - start))));
    }
    return Flux.range(0, run.size())
        .filter(i -> fresh.contains(run.get(i)))
        .concatMap(i -> {
          effectAt.set(i);
          return observations.asCurrent(run.get(i),
              runHandler(run.get(i), new TxHandle(connection, run.get(i).id(), name, MessageMetadata.of(run.get(i))), i));
        })
        .then();
  }

  /**
   * One transaction: the dedup row, then the handler if the row is new. Errors of the handler
   * arrive wrapped in {@link HandlerFailure}; an error after the handler succeeded that says the
   * database would not commit its writes (COMMIT answered ROLLBACK, a deferred constraint, a
   * serialization failure) arrives wrapped in {@link CommitRejected}; any other error came from
   * the transaction itself (acquiring a connection, BEGIN, the inbox insert, COMMIT, the timeout).
   */
  private Mono<Boolean> attemptOnce(Delivery<T> delivery, int attempt) {
    long start = System.nanoTime();
    AtomicBoolean handlerDone = new AtomicBoolean();
    java.util.function.BiFunction<io.r2dbc.spi.Connection, Boolean, Mono<Boolean>> afterRecord = (connection, inserted) -> inserted
        ? runHandler(delivery, new TxHandle(connection, delivery.id(), name, MessageMetadata.of(delivery))).doOnSuccess(ok -> handlerDone.set(true))
        : Mono.just(false);
    Mono<Boolean> transaction = transactions instanceof R2dbcTransactionRunner r2dbc
        // The default runner sends the dedup insert with BEGIN: one round trip less.
        ? r2dbc.inTransaction(connection -> inbox.recordPipelined(connection, name, delivery.id()), afterRecord)
        : transactions.inTransaction(connection -> inbox.record(connection, name, delivery.id())
            .flatMap(inserted -> afterRecord.apply(connection, inserted)));
    return transaction
        .timeout(transactionTimeout)
        .onErrorMap(error -> handlerDone.get() && !(error instanceof HandlerFailure) && CommitRejected.matches(error),
            CommitRejected::new)
        .doOnSuccess(inserted -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), true))
        .doOnError(error -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), false));
  }

  private Mono<Boolean> runHandler(Delivery<T> delivery, TxHandle tx) {
    return runHandler(delivery, tx, -1);
  }

  /** The per-message effect (or the batch handler with one message); errors carry the index in their batch. */
  private Mono<Boolean> runHandler(Delivery<T> delivery, TxHandle tx, int index) {
    long start = System.nanoTime();
    return guardedEffect(() -> handler != null
            ? handler.handle(delivery.payload(), tx)
            : batchHandler.handle(List.of(new BatchItem<>(delivery.id(), delivery.payload(), delivery)), tx), index)
        .doOnSuccess(ignored -> metrics.handler(delivery, Duration.ofNanos(System.nanoTime() - start)))
        .thenReturn(true);
  }

  /**
   * Subscribes the user's effect. Reactor's own operators rethrow JVM errors
   * ({@code Exceptions.throwIfJvmFatal}) instead of signalling them; subscribing with a plain
   * Subscriber inside try/catch turns every Throwable that reaches this point, thrown or
   * signalled, into a {@link HandlerFailure}.
   */
  private static Mono<Void> guardedEffect(java.util.function.Supplier<Publisher<?>> effect, int index) {
    return Mono.<Void>create(sink -> {
      try {
        Objects.requireNonNull(MessageObservations.inScope(sink.contextView(), effect), "handler returned null")
            .subscribe(new EffectSubscriber(sink, index));
      } catch (Throwable e) {
        sink.error(new HandlerFailure(e, index));
      }
    });
  }

  /**
   * Completes the sink when the handler's publisher completes; wraps its error as the handler's.
   * A {@link reactor.core.CoreSubscriber}, so that the handler's publisher sees the pipeline's
   * Reactor context: the current observation, and the transaction a framework's transaction
   * runner binds there (Spring's {@code TransactionalOperator} does), which the handler's
   * repositories must find.
   */
  private static final class EffectSubscriber implements reactor.core.CoreSubscriber<Object> {
    private final reactor.core.publisher.MonoSink<Void> sink;
    private final int index;
    private volatile org.reactivestreams.Subscription subscription;

    EffectSubscriber(reactor.core.publisher.MonoSink<Void> sink, int index) {
      this.sink = sink;
      this.index = index;
    }

    @Override
    public reactor.util.context.Context currentContext() {
      return DriverBoundary.withReporter(reactor.util.context.Context.of(sink.contextView()), this::jvmError);
    }

    @Override
    public void onSubscribe(org.reactivestreams.Subscription subscription) {
      this.subscription = subscription;
      sink.onCancel(subscription::cancel);
      subscription.request(Long.MAX_VALUE);
    }

    /** A JVM error that the handler's operators raised on the driver's thread: the attempt ends with it. */
    private void jvmError(Throwable error) {
      org.reactivestreams.Subscription s = subscription;
      if (s != null) {
        s.cancel();
      }
      sink.error(new HandlerFailure(error, index));
    }

    @Override
    public void onNext(Object value) {
      // values of the effect are ignored
    }

    @Override
    public void onError(Throwable error) {
      sink.error(new HandlerFailure(error, index));
    }

    @Override
    public void onComplete() {
      sink.success();
    }
  }

  /** The attempt counters of one message and the decision after each failure. */
  private final class Attempts {
    private final Delivery<T> delivery;
    private long firstFailureAt;
    private int attempts;
    private int retryableFailures;
    private int contentionInARow;
    private int infrastructureInARow;
    private long lastWarning;

    Attempts(Delivery<T> delivery) {
      this.delivery = delivery;
    }

    int next() {
      return ++attempts;
    }

    int count() {
      return attempts;
    }

    /**
     * Waits before the next attempt, or errors with {@code failure} to stop retrying. Retryable
     * failures count towards {@code maxAttempts} even across other kinds, so alternating
     * failure kinds cannot keep a message alive forever.
     */
    Mono<Long> backoffOrGiveUp(Throwable failure) {
      ErrorKind kind = kindOf(failure);
      if (isFatal(failure)) {
        return Mono.error(failure);
      }
      if (kind != ErrorKind.INFRASTRUCTURE) {
        infrastructureInARow = 0;
      }
      if (kind != ErrorKind.CONTENTION) {
        contentionInARow = 0;
      } else if (++contentionInARow > retryPolicy.maxContentionRetries()) {
        kind = ErrorKind.RETRYABLE;
      }
      Duration wait;
      switch (kind) {
        case INFRASTRUCTURE -> {
          warnWhileStuck(failure, infrastructureInARow++);
          wait = Backoff.jittered(retryPolicy.infrastructureBackoff(), retryPolicy.infrastructureMaxBackoff(), infrastructureInARow - 1);
        }
        case CONTENTION -> wait = Backoff.jittered(retryPolicy.firstBackoff(), retryPolicy.maxBackoff(), contentionInARow - 1);
        case RETRYABLE -> {
          if (++retryableFailures >= retryPolicy.maxAttempts()) {
            return Mono.error(failure);
          }
          wait = Backoff.jittered(retryPolicy.firstBackoff(), retryPolicy.maxBackoff(), retryableFailures - 1);
        }
        default -> {
          return Mono.error(failure);
        }
      }
      metrics.retrying(delivery, cause(failure), kind);
      // A graceful stop abandons a message waiting here at once.
      return StopControl.backoff(wait);
    }

    /**
     * For a batch: waits and retries the whole batch on infrastructure failures and on
     * contention within its bound; anything else that is not fatal splits the batch.
     */
    Mono<Long> backoffOrSplit(Throwable failure) {
      if (isFatal(failure)) {
        return Mono.error(failure);
      }
      if (failure instanceof EffectTimeout) {
        return Mono.error(new BatchSplit(failure));
      }
      ErrorKind kind = kindOf(failure);
      if (kind == ErrorKind.INFRASTRUCTURE || (kind == ErrorKind.CONTENTION && contentionInARow < retryPolicy.maxContentionRetries())) {
        return backoffOrGiveUp(failure);
      }
      return Mono.error(new BatchSplit(failure));
    }

    /** WARN when a message starts waiting for infrastructure, then every {@code stuckWarningInterval} while it waits. */
    private void warnWhileStuck(Throwable failure, int retriesInARow) {
      long now = System.nanoTime();
      if (retriesInARow == 0) {
        firstFailureAt = now;
        lastWarning = now;
        log.warn("Consumer '{}': infrastructure unavailable while processing message '{}'; backing off and retrying until it is back: {}",
            name, idForLogs(delivery), LogText.cut(cause(failure).toString()));
      } else if (now - lastWarning >= stuckWarningInterval.toNanos()) {
        lastWarning = now;
        log.warn("Consumer '{}': message '{}' has been waiting for infrastructure for {} s ({} retries); it holds its slot "
            + "(and on Kafka its partition's commits) until the dependency is back: {}",
            name, idForLogs(delivery), Duration.ofNanos(now - firstFailureAt).toSeconds(), retriesInARow + 1,
            LogText.cut(cause(failure).toString()));
      } else {
        log.debug("Consumer '{}': still waiting for infrastructure for message '{}' (retry {}): {}",
            name, idForLogs(delivery), retriesInARow + 1, LogText.cut(cause(failure).toString()));
      }
    }
  }

  /**
   * What kind of failure ended an attempt. The three origins are classified apart:
   * <ul>
   *   <li>the handler's own errors as the classifier says (they are the message's, unless they
   *       are I/O or contention);</li>
   *   <li>a COMMIT the database refused after the handler ran (it swallowed an SQL error, a
   *       deferred constraint, a serialization failure) as the classifier says of the cause:
   *       the message's fault, or contention;</li>
   *   <li>errors of the transaction itself (a refused connection, a closed pool, a missing
   *       inbox table, a read-only server, a timeout) as infrastructure, unless the classifier
   *       calls them non-retryable: they are never the message's fault.</li>
   * </ul>
   * JVM errors ({@link VirtualMachineError}, {@link LinkageError}) are fatal wherever they come from.
   */
  private ErrorKind kindOf(Throwable error) {
    if (error instanceof HandlerFailure || error instanceof CommitRejected) {
      return classify(error.getCause());
    }
    ErrorKind kind = classify(error);
    return kind == ErrorKind.RETRYABLE || kind == ErrorKind.CONTENTION ? ErrorKind.INFRASTRUCTURE : kind;
  }

  private ErrorKind classify(Throwable error) {
    ErrorKind kind = classifier.classify(error);
    return kind != null ? kind : ErrorKind.RETRYABLE;
  }

  static boolean isFatal(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof VirtualMachineError || t instanceof LinkageError) {
        return true;
      }
    }
    return false;
  }

  /** What the stream ends with: the JVM error itself when there is one, else the error without Idem's markers. */
  private static Throwable surfaced(Throwable error) {
    Error jvmError = JvmErrors.fatalIn(error);
    return jvmError != null ? jvmError : cause(error);
  }

  private static Throwable cause(Throwable error) {
    return error instanceof HandlerFailure || error instanceof CommitRejected ? error.getCause() : error;
  }

  private DeadLetter deadLetterFor(Throwable error, int attempts) {
    DeadLetterReason reason = kindOf(error) == ErrorKind.NON_RETRYABLE ? DeadLetterReason.NON_RETRYABLE_ERROR : DeadLetterReason.RETRIES_EXHAUSTED;
    return DeadLetter.of(reason, cause(error), name, attempts);
  }

  private DeadLetter validate(Delivery<T> delivery) {
    try {
      return check(delivery);
    } catch (RuntimeException | AssertionError | StackOverflowError e) {
      // The delivery could not say what it is (its id, payload or decoding state threw). Other
      // JVM errors (OutOfMemoryError, LinkageError) are not the message's: they propagate.
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
    int badSurrogate = unpairedSurrogate(id);
    if (badSurrogate >= 0) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID, "id is not well-formed UTF-16: unpaired surrogate U+"
          + Integer.toHexString(id.charAt(badSurrogate)).toUpperCase(java.util.Locale.ROOT) + " at index " + badSurrogate
          + " (an id decoded from malformed bytes would collide with others)", name);
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

  /** The index of the first unpaired surrogate, or -1 when the string is well-formed UTF-16. */
  static int unpairedSurrogate(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          i++;
        } else {
          return i;
        }
      } else if (Character.isLowSurrogate(c)) {
        return i;
      }
    }
    return -1;
  }

  /**
   * Acknowledges. A failed acknowledgement is not retried here (the adapter retried what it
   * could): the message stays unsettled and the broker redelivers it, as a duplicate.
   */
  private Mono<Outcome<T>> ack(Delivery<T> delivery, Outcome.Status status, int attempts) {
    return delivery.ack()
        .then(Mono.fromCallable(() -> settled(new Outcome<>(status, delivery, null, attempts))))
        .onErrorResume(error -> !isFatal(error), error -> {
          log.warn("Consumer '{}': the acknowledgement of message '{}' failed; it stays unsettled and will be redelivered "
              + "(then acknowledged as a duplicate): {}", name, idForLogs(delivery), LogText.cut(error.toString()));
          return unsettled(delivery, "ack", error);
        });
  }

  /**
   * Dead-letters. A failed dead-letter settlement is not retried here: the adapter already
   * retried what it could, so this is for good. It is logged at ERROR and counted; the message
   * stays unacknowledged (RabbitMQ redelivers it; on Kafka its partition's commits wait for it).
   */
  private Mono<Outcome<T>> deadLetter(Delivery<T> delivery, DeadLetter deadLetter) {
    return delivery.deadLetter(deadLetter)
        .then(Mono.fromCallable(() -> {
          log.warn("Consumer '{}' dead-lettered message '{}' after {} attempt(s): {}",
              name, idForLogs(delivery), deadLetter.attempts(), LogText.cut(deadLetter.detail()));
          return settled(new Outcome<>(Outcome.Status.DEAD_LETTERED, delivery, deadLetter, deadLetter.attempts()));
        }))
        .onErrorResume(error -> !isFatal(error), error -> {
          log.error("Consumer '{}': the dead letter of message '{}' could not be delivered ({}); the message stays "
              + "unacknowledged: RabbitMQ redelivers it, on Kafka its partition's commits wait for it. Dead letter: {}",
              name, idForLogs(delivery), LogText.cut(error.toString()), LogText.cut(deadLetter.detail()));
          return unsettled(delivery, "dead-letter", error);
        });
  }

  private static String idForLogs(Delivery<?> delivery) {
    try {
      return LogText.cutId(delivery.id());
    } catch (RuntimeException | AssertionError | StackOverflowError e) {
      return "<id unreadable: " + LogText.cut(String.valueOf(e.getMessage())) + ">";
    }
  }

  private Outcome<T> settled(Outcome<T> outcome) {
    metrics.settled(outcome);
    return outcome;
  }

  private Mono<Outcome<T>> unsettled(Delivery<T> delivery, String step, Throwable error) {
    metrics.settlementFailed(delivery, step, error);
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

  /**
   * Marks an error at COMMIT, after the handler succeeded, that says the database would not
   * commit the handler's writes: the message's failure, not the infrastructure's.
   */
  static final class CommitRejected extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CommitRejected(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }

    /** COMMIT answered ROLLBACK, or a data, integrity, transaction-state or rollback SQLSTATE. */
    static boolean matches(Throwable error) {
      if (error instanceof io.r2dbc.spi.R2dbcRollbackException) {
        return true;
      }
      String state = error instanceof io.r2dbc.spi.R2dbcException r2dbc ? r2dbc.getSqlState() : null;
      return state != null && (state.startsWith("22") || state.startsWith("23") || state.startsWith("25") || state.startsWith("40"));
    }
  }

  /** Tells a batch to split, at {@link #index} when known. */
  static final class BatchSplit extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int index;

    BatchSplit(Throwable cause) {
      super(cause.toString(), cause, false, false);
      this.index = cause instanceof HandlerFailure failure ? failure.index : cause instanceof EffectTimeout timeout ? timeout.index : -1;
    }

    /** What the isolated message's own retries start from: a timeout as such, as in per-message mode. */
    Throwable failure() {
      return getCause() instanceof EffectTimeout timeout ? timeout.getCause() : getCause();
    }
  }

  /**
   * The {@code transactionTimeout} of a batch, struck while the effect of the message at
   * {@link #index} ran ({@link #UNKNOWN} while a batch handler ran for several): the batch splits
   * around it like around a failing message, and that message is then retried on its own, where a
   * timeout is infrastructure as in per-message mode.
   */
  static final class EffectTimeout extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** No effect was running: the timeout struck in BEGIN, the dedup insert or COMMIT. */
    static final int NOT_IN_EFFECTS = -2;
    /** A batch handler ran for several messages. */
    static final int UNKNOWN = -1;
    final int index;

    EffectTimeout(Throwable timeout, int index) {
      super(timeout.toString(), timeout, false, false);
      this.index = index;
    }
  }

  /** Marks an error as the handler's, so that it is told apart from errors of the transaction. */
  static final class HandlerFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The failing message's index in its batch, or -1 when unknown or not batched. */
    final int index;

    HandlerFailure(Throwable cause, int index) {
      super(cause.toString(), cause, false, false);
      this.index = index;
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
    private BatchHandler<T> batchHandler;
    private int maxBatchSize = DEFAULT_MAX_BATCH_SIZE;
    private Duration batchMaxWait = Duration.ZERO;
    private TransactionRunner transactions;
    private int concurrency = DEFAULT_CONCURRENCY;
    private int prefetch = DEFAULT_PREFETCH;
    private Ordering ordering = DEFAULT_ORDERING;
    private RetryPolicy retryPolicy = RetryPolicy.defaults();
    private ErrorClassifier classifier = ErrorClassifier.defaults();
    private int maxIdLength = DEFAULT_MAX_ID_LENGTH;
    private ConsumerMetrics metrics = ConsumerMetrics.NONE;
    private Duration transactionTimeout = DEFAULT_TRANSACTION_TIMEOUT;
    private ServerTimeouts serverTimeouts;
    private Duration stuckWarningInterval = DEFAULT_STUCK_WARNING_INTERVAL;
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
     * other keys of the lane go on. Default {@value IdempotentConsumer#DEFAULT_MAX_BATCH_SIZE}
     * (off); 64 with a prefetch of {@code concurrency x 64} is a good start.
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
     * How often a message that keeps failing on infrastructure is logged again at WARN, with how
     * long it has waited, so that an operator sees what holds a slot (and on Kafka a
     * partition's commits). The first failure is always logged at WARN. Default 1 min.
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
        throw new IllegalArgumentException("consumer name must be at most 255 characters without control characters, was: " + name);
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
