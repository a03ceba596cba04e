package dev.idem.pipeline;

import dev.idem.ConsumerMetrics;
import dev.idem.DeadLetter;
import dev.idem.Delivery;
import dev.idem.Outcome;
import dev.idem.internal.LaneControl;
import dev.idem.internal.LogText;
import dev.idem.internal.MessageObservations;
import dev.idem.pipeline.PipelineFailures.BatchSplit;
import dev.idem.pipeline.PipelineFailures.EffectTimeout;
import dev.idem.pipeline.PipelineFailures.SlowEffect;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * One micro-batch of one lane, from validation to settlement: runs of valid deliveries share a
 * {@link BatchTransaction}, retried as a unit on infrastructure failures and contention; a
 * failure of a message's own kind splits the run, and the failing message goes off the lane to
 * the {@link MessagePath}.
 *
 * @param <T> the payload type
 */
final class BatchPath<T> {

  // The consumer's log category: operators and tests address the pipeline's messages by it.
  private static final Logger log = LoggerFactory.getLogger(Pipeline.LOG);

  private final ConsumerSettings<T> settings;
  private final String name;
  private final ConsumerMetrics metrics;
  private final MessageObservations observations;
  private final Duration transactionTimeout;
  private final DeliveryValidation validation;
  private final BatchTransaction<T> transaction;
  private final MessagePath<T> messages;
  private final FailureKinds kinds;
  private final Settlement settlement;
  private final DeadlockRecovery deadlocks;
  private final Duration slowMessageThreshold;
  /** What a cancel leaves in a run's count of acknowledgements in place: none is taken after it. */
  private static final int CANCELLED = Integer.MAX_VALUE;

  BatchPath(ConsumerSettings<T> settings, DeliveryValidation validation, BatchTransaction<T> transaction,
      MessagePath<T> messages, FailureKinds kinds, Settlement settlement, DeadlockRecovery deadlocks) {
    this.settings = settings;
    this.name = settings.name();
    this.metrics = settings.metrics();
    this.observations = settings.observations();
    this.transactionTimeout = settings.transactionTimeout();
    this.validation = validation;
    this.transaction = transaction;
    this.messages = messages;
    this.kinds = kinds;
    this.settlement = settlement;
    this.deadlocks = deadlocks;
    this.slowMessageThreshold = settings.slowMessageThreshold();
  }

  /**
   * One micro-batch of one lane, in order: each run of valid deliveries shares a transaction;
   * a delivery that fails validation is dead-lettered where it stands.
   */
  Flux<Outcome<T>> process(List<Delivery<T>> batch, LaneControl<Delivery<T>, Outcome<T>> lane) {
    return observations.isOn()
        ? observations.batch(batch, batchParts(batch, lane), Outcome::delivery, o -> o.status().name())
        : batchParts(batch, lane);
  }

  /** {@link #process} without observations. */
  private Flux<Outcome<T>> batchParts(List<Delivery<T>> batch, LaneControl<Delivery<T>, Outcome<T>> lane) {
    List<Flux<Outcome<T>>> parts = new ArrayList<>();
    List<Delivery<T>> run = new ArrayList<>();
    for (Delivery<T> delivery : batch) {
      metrics.started(delivery);
      DeadLetter rejection = validation.validate(delivery);
      if (rejection == null) {
        run.add(delivery);
        continue;
      }
      if (!run.isEmpty()) {
        parts.add(batchRun(List.copyOf(run), lane));
        run.clear();
      }
      parts.add(settlement.deadLetter(delivery, rejection).flux());
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
  private Flux<Outcome<T>> batchRun(List<Delivery<T>> candidates, LaneControl<Delivery<T>, Outcome<T>> lane) {
    return Flux.defer(() -> {
      List<Delivery<T>> run = lane.admit(candidates);
      if (run.isEmpty()) {
        return Flux.empty();
      }
      RetryDecision attempts = new RetryDecision(settings, kinds, run.get(0));
      // On cancellation the messages that neither settled nor went on to a split's runs are abandoned:
      // the first acknowledgedInPlace of the run were taken by the acks in place (a cancel closes that
      // count, so none is taken after it), the others as `settled` says.
      AtomicInteger acknowledgedInPlace = new AtomicInteger();
      Set<Delivery<T>> settled = Collections.newSetFromMap(new ConcurrentHashMap<>());
      AtomicBoolean splitting = new AtomicBoolean();
      // After a deadlock the batch is retried in place, alone (DeadlockRecovery): the order of its keys holds.
      AtomicBoolean deadlocked = new AtomicBoolean();
      return Mono
          .defer(() -> deadlocks.attempt(run, deadlocked.get(), Mono.defer(() -> transaction.attemptBatch(run, attempts.next()))))
          .retryWhen(Retry.from(signals -> signals.concatMap(signal -> {
            if (deadlocks.failed(run, signal.failure())) {
              deadlocked.set(true);
            }
            return attempts.backoffOrSplit(signal.failure());
          })))
          .flatMapMany(fresh -> acknowledge(run, fresh, attempts.count(), acknowledgedInPlace, settled))
          .doOnCancel(() -> {
            int inPlace = acknowledgedInPlace.getAndSet(CANCELLED);
            if (!splitting.get()) {
              run.subList(inPlace, run.size()).stream().filter(d -> !settled.contains(d)).forEach(metrics::abandoned);
            }
          })
          .onErrorResume(BatchSplit.class, split -> {
            splitting.set(true);
            if (split.getCause() instanceof SlowEffect slow) {
              log.info(
                  "Consumer '{}': the handler of message '{}' ran for {} ms in a batch of {}, past the slowMessageThreshold of {} ms; "
                      + "it is detached: the batch commits without it, and it continues on its own{}",
                  name,
                  Settlement.idForLogs(run.get(slow.index)), slow.ran.toMillis(), run.size(), slowMessageThreshold.toMillis(),
                  run.size() > 1 ? "" : ", off its lane");
            } else if (split.getCause() instanceof EffectTimeout && run.size() > 1) {
              log.warn("Consumer '{}': a batch of {} messages did not finish within the transactionTimeout of {} ms while {}; "
                  + "it is split: the others commit without {}, which is retried on its own",
                  name, run.size(), transactionTimeout.toMillis(),
                  split.index >= 0
                      ? "the handler of message '" + Settlement.idForLogs(run.get(split.index)) + "' ran"
                      : "the batch handler ran",
                  split.index >= 0 ? "it" : "the message that hangs (found by halving the batch)");
            } else if (FailureKinds.serverTimeoutOfEffect(Objects.requireNonNull(split.getCause())) != null) {
              logServerTimeout(run, split);
            }
            return split(run, split, lane, run.size() == 1 ? attempts : null);
          })
          .onErrorMap(FailureKinds::surfaced)
          .doOnError(fatal -> {
            if (run.size() == 1) {
              log.error("Consumer '{}': a JVM error while processing message '{}'; the message stays unacknowledged and "
                  + "the stream terminates with the error so that the application (or its supervisor) can restart: {}",
                  name, Settlement.idForLogs(run.get(0)), LogText.cut(fatal.toString()));
            } else {
              log.error(
                  "Consumer '{}': a JVM error while processing a batch of {} messages from '{}'; they stay unacknowledged and "
                      + "the stream terminates with the error: {}",
                  name, run.size(), Settlement.idForLogs(run.get(0)), LogText.cut(fatal.toString()));
            }
            run.forEach(metrics::abandoned);
          });
    });
  }

  /**
   * The acknowledgements of a committed run, their outcomes in order. Deliveries whose adapter
   * acknowledges in place are settled here with a plain call each, as long as the run allows;
   * the rest are asked for together: one waiting for the one before would cost a hand-off to the
   * adapter's settling thread and back per message, and leave the adapter nothing to coalesce.
   */
  private Flux<Outcome<T>> acknowledge(List<Delivery<T>> run, Set<Delivery<T>> fresh, int attempts,
      AtomicInteger acknowledgedInPlace,
      Set<Delivery<T>> settled) {
    List<Outcome<T>> inPlace = new ArrayList<>(run.size());
    int at = 0;
    while (at < run.size() && Settlement.acksInPlace(run.get(at))) {
      // Taken before it is acknowledged: a cancel that comes meanwhile leaves it to this loop, and stops the loop.
      if (!acknowledgedInPlace.compareAndSet(at, at + 1)) {
        return Flux.empty();
      }
      if (!settlement.ackInPlace(run.get(at), status(run.get(at), fresh), attempts, inPlace)) {
        // Another settlement of it started (its ack() was called elsewhere): the Mono path shares that one.
        if (!acknowledgedInPlace.compareAndSet(at + 1, at)) {
          return Flux.empty();
        }
        break;
      }
      at++;
    }
    if (at == run.size()) {
      return Flux.fromIterable(inPlace);
    }
    Flux<Outcome<T>> rest = Flux.fromIterable(run.subList(at, run.size()))
        .flatMapSequential(d -> settlement.ack(d, status(d, fresh), attempts).doOnTerminate(() -> settled.add(d)),
            run.size() - at, 1);
    return inPlace.isEmpty() ? rest : Flux.fromIterable(inPlace).concatWith(rest);
  }

  private static <T> Outcome.Status status(Delivery<T> delivery, Set<Delivery<T>> fresh) {
    return fresh.contains(delivery) ? Outcome.Status.PROCESSED : Outcome.Status.DUPLICATE;
  }

  /**
   * A handler's statement that the server stopped on a timeout splits the batch; the WARN names
   * the message when it is known: a per-message handler's, or the last one left by halving a
   * batch handler's batch (a per-message handler's batch of one is named by its retries' log).
   */
  private void logServerTimeout(List<Delivery<T>> run, BatchSplit split) {
    Throwable cause = Objects.requireNonNull(split.getCause());
    String state = FailureKinds.serverTimeoutOfEffect(cause);
    String error = LogText.cut(String.valueOf(FailureKinds.cause(cause).getMessage()));
    if (run.size() > 1) {
      log.warn("Consumer '{}': the server stopped a statement of {} in a batch of {} messages (SQLSTATE {}: {}); "
          + "the batch is split: the others commit without {}, which is retried on its own",
          name,
          split.index >= 0 ? "the handler of message '" + Settlement.idForLogs(run.get(split.index)) + "'" : "the batch handler",
          run.size(), state, error,
          split.index >= 0 ? "it" : "the message whose statement timed out (found by halving the batch)");
    } else if (split.index < 0) {
      log.warn("Consumer '{}': the server stopped a statement of the batch handler for message '{}' alone (SQLSTATE {}: {}); "
          + "it is retried on its own", name, Settlement.idForLogs(run.get(0)), state, error);
    }
  }

  /**
   * The messages before the failing one commit first; then the failing one goes off the lane to
   * be retried or dead-lettered alone, and the lane goes on with the messages after it.
   */
  private Flux<Outcome<T>> split(List<Delivery<T>> run, BatchSplit split, LaneControl<Delivery<T>, Outcome<T>> lane,
      @Nullable RetryDecision alone) {
    int failing = run.size() == 1 ? 0 : split.index;
    if (failing >= 0 && failing < run.size()) {
      Delivery<T> bad = run.get(failing);
      return Flux.concat(batchRun(run.subList(0, failing), lane), Flux.defer(() -> {
        lane.offLane(bad, split.getCause() instanceof SlowEffect
            ? messages.handleDetached(bad, alone)
            : messages.handleAfterBatchFailure(bad, split.failure(), alone));
        return batchRun(run.subList(failing + 1, run.size()), lane);
      }));
    }
    int half = run.size() / 2;
    return Flux.concat(batchRun(run.subList(0, half), lane), batchRun(run.subList(half, run.size()), lane));
  }
}
