package dev.idem.pipeline;

import dev.idem.ConsumerMetrics;
import dev.idem.DeadLetter;
import dev.idem.Delivery;
import dev.idem.IdemObservations;
import dev.idem.Outcome;
import dev.idem.internal.LogText;
import dev.idem.internal.MessageObservations;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * One message on its own, from validation to settlement: its transaction attempts with the
 * retries its {@link RetryDecision} allows, then its ack, its dead letter, or a JVM error that
 * ends the stream. Used for every message without batching, and for the message a batch split
 * off because it failed.
 *
 * @param <T> the payload type
 */
final class MessagePath<T> {

  // The consumer's log category: operators and tests address the pipeline's messages by it.
  private static final Logger log = LoggerFactory.getLogger(Pipeline.LOG);

  private final ConsumerSettings<T> settings;
  private final String name;
  private final ConsumerMetrics metrics;
  private final MessageObservations observations;
  private final DeliveryValidation validation;
  private final BatchTransaction<T> transaction;
  private final FailureKinds kinds;
  private final Settlement settlement;
  private final DeadlockRecovery deadlocks;

  MessagePath(ConsumerSettings<T> settings, DeliveryValidation validation, BatchTransaction<T> transaction,
      FailureKinds kinds, Settlement settlement, DeadlockRecovery deadlocks) {
    this.settings = settings;
    this.name = settings.name();
    this.metrics = settings.metrics();
    this.observations = settings.observations();
    this.validation = validation;
    this.transaction = transaction;
    this.kinds = kinds;
    this.settlement = settlement;
    this.deadlocks = deadlocks;
  }

  /** One message, from validation to settlement. */
  Mono<Outcome<T>> handle(Delivery<T> delivery) {
    return observations.message(delivery, Mono.defer(() -> {
      metrics.started(delivery);
      DeadLetter rejection = validation.validate(delivery);
      if (rejection != null) {
        return settlement.deadLetter(delivery, rejection);
      }
      return attempt(delivery, new RetryDecision(settings, kinds, delivery), Mono.empty(), false);
    }), outcome -> outcome.status().name());
  }

  /**
   * A message detached from its batch because its handler ran past the
   * {@code slowMessageThreshold}: it runs again at once, alone, without a threshold; the cancelled
   * batch attempt counts as an attempt but not as a failure ({@code alone} as for
   * {@link #handleAfterBatchFailure}).
   */
  Mono<Outcome<T>> handleDetached(Delivery<T> delivery, @Nullable RetryDecision alone) {
    return Mono.defer(() -> {
      RetryDecision attempts = alone != null ? alone : new RetryDecision(settings, kinds, delivery);
      if (alone == null) {
        attempts.next();
      }
      return attempt(delivery, attempts, Mono.empty(), false);
    });
  }

  /**
   * The failing message of a split batch, alone: its failed batch attempt counts as its first.
   * When the batch was this message alone, its attempts so far are its own and carry on
   * ({@code alone}), so that a batch of one counts attempts as a message without batching does.
   */
  Mono<Outcome<T>> handleAfterBatchFailure(Delivery<T> delivery, Throwable batchFailure, @Nullable RetryDecision alone) {
    return Mono.defer(() -> {
      RetryDecision attempts = alone != null ? alone : new RetryDecision(settings, kinds, delivery);
      if (alone == null) {
        attempts.next();
      }
      return attempt(delivery, attempts, attempts.backoffOrGiveUp(batchFailure), DeadlockRecovery.isDeadlock(batchFailure));
    });
  }

  /**
   * Attempts with retries after {@code before}, then the settlement: ack, dead letter, or a fatal
   * error. Each attempt passes the {@link DeadlockRecovery}: once one deadlocked (or
   * {@code afterDeadlock}), the next run alone.
   */
  private Mono<Outcome<T>> attempt(Delivery<T> delivery, RetryDecision attempts, Mono<?> before, boolean afterDeadlock) {
    List<Delivery<T>> itself = List.of(delivery);
    AtomicBoolean deadlocked = new AtomicBoolean(afterDeadlock);
    // A cancel that comes after the outcome went out (the lane takes its one outcome and cancels) abandons nothing.
    AtomicBoolean settledHere = new AtomicBoolean();
    return before.then(Mono.defer(() -> deadlocks.attempt(itself, deadlocked.get(), Mono.defer(() -> {
      int attempt = attempts.next();
      return observations.child(IdemObservations.TRANSACTION, attempt, transaction.attemptAlone(delivery, attempt));
    })))
        .retryWhen(Retry.from(signals -> signals.concatMap(signal -> {
          if (deadlocks.failed(itself, signal.failure())) {
            deadlocked.set(true);
          }
          return attempts.backoffOrGiveUp(signal.failure());
        }))))
        .flatMap(inserted -> observations.child(IdemObservations.SETTLE, 0,
            settlement.ack(delivery, inserted ? Outcome.Status.PROCESSED : Outcome.Status.DUPLICATE, attempts.count())))
        .onErrorResume(error -> !FailureKinds.isFatal(error),
            error -> observations.child(IdemObservations.SETTLE, 0,
                settlement.deadLetter(delivery, kinds.deadLetterFor(error, attempts.count()))))
        .onErrorMap(FailureKinds::surfaced)
        .doOnError(fatal -> {
          log.error("Consumer '{}': a JVM error while processing message '{}'; the message stays unacknowledged and "
              + "the stream terminates with the error so that the application (or its supervisor) can restart: {}",
              name, Settlement.idForLogs(delivery), LogText.cut(fatal.toString()));
          metrics.abandoned(delivery);
        })
        .doOnNext(outcome -> settledHere.set(true))
        .doOnCancel(() -> {
          if (!settledHere.get()) {
            metrics.abandoned(delivery);
          }
        });
  }
}
