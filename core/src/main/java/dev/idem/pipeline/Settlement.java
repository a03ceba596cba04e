package dev.idem.pipeline;

import dev.idem.AbstractDelivery;
import dev.idem.ConsumerMetrics;
import dev.idem.DeadLetter;
import dev.idem.Delivery;
import dev.idem.Outcome;
import dev.idem.internal.InPlaceAcks;
import dev.idem.internal.LogText;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * The last stage: acknowledges or dead-letters a message and emits its {@link Outcome}. A
 * settlement that fails is not retried here (the adapter retried what it could): the message
 * stays unsettled, is counted, and emits no outcome.
 */
final class Settlement {

  // The consumer's log category: operators and tests address the pipeline's messages by it.
  private static final Logger log = LoggerFactory.getLogger(Pipeline.LOG);

  private final String name;
  private final ConsumerMetrics metrics;

  Settlement(ConsumerSettings<?> settings) {
    this.name = settings.name();
    this.metrics = settings.metrics();
  }

  /**
   * Acknowledges. A failed acknowledgement is not retried here (the adapter retried what it
   * could): the message stays unsettled and the broker redelivers it, as a duplicate.
   */
  <T> Mono<Outcome<T>> ack(Delivery<T> delivery, Outcome.Status status, int attempts) {
    return delivery.ack()
        .then(Mono.fromCallable(() -> settled(new Outcome<>(status, delivery, null, attempts))))
        .onErrorResume(error -> !FailureKinds.isFatal(error), error -> {
          ackFailed(delivery, error);
          return Mono.empty();
        });
  }

  private void ackFailed(Delivery<?> delivery, Throwable error) {
    log.warn("Consumer '{}': the acknowledgement of message '{}' failed; it stays unsettled and will be redelivered "
        + "(then acknowledged as a duplicate): {}", name, idForLogs(delivery), LogText.cut(error.toString()));
    metrics.settlementFailed(delivery, "ack", error);
    metrics.abandoned(delivery);
  }

  /** Whether the delivery's adapter acknowledges in place ({@link InPlaceAcks}). */
  static boolean acksInPlace(Delivery<?> delivery) {
    return InPlaceAcks.acksInPlace(delivery);
  }

  /**
   * Acknowledges on the calling thread when the delivery's adapter can
   * ({@link InPlaceAcks#ackInPlace}), with {@link #ack}'s outcomes: the outcome is added
   * to {@code outcomes}; an ack that failed adds none, and the message stays unsettled.
   *
   * @return {@code false} when the delivery acknowledges only through {@link #ack}; nothing was done then
   */
  <T> boolean ackInPlace(Delivery<T> delivery, Outcome.Status status, int attempts, List<Outcome<T>> outcomes) {
    if (!acksInPlace(delivery)) {
      return false;
    }
    try {
      if (!InPlaceAcks.ackInPlace((AbstractDelivery<T>) delivery)) {
        return false;
      }
    } catch (RuntimeException | Error error) {
      if (FailureKinds.isFatal(error)) {
        throw error;
      }
      ackFailed(delivery, error);
      return true;
    }
    outcomes.add(settled(new Outcome<>(status, delivery, null, attempts)));
    return true;
  }

  /**
   * Dead-letters. A failed dead-letter settlement is not retried here: the adapter already
   * retried what it could, so this is for good. It is logged at ERROR and counted; the message
   * stays unacknowledged (RabbitMQ redelivers it; on Kafka its partition's commits wait for it).
   */
  <T> Mono<Outcome<T>> deadLetter(Delivery<T> delivery, DeadLetter deadLetter) {
    return delivery.deadLetter(deadLetter)
        .then(Mono.fromCallable(() -> {
          log.warn("Consumer '{}' dead-lettered message '{}' after {} attempt(s): {}",
              name, idForLogs(delivery), deadLetter.attempts(), LogText.cut(deadLetter.detail()));
          return settled(new Outcome<>(Outcome.Status.DEAD_LETTERED, delivery, deadLetter, deadLetter.attempts()));
        }))
        .onErrorResume(error -> !FailureKinds.isFatal(error), error -> {
          log.error("Consumer '{}': the dead letter of message '{}' could not be delivered ({}); the message stays "
              + "unacknowledged: RabbitMQ redelivers it, on Kafka its partition's commits wait for it. Dead letter: {}",
              name, idForLogs(delivery), LogText.cut(error.toString()), LogText.cut(deadLetter.detail()));
          return unsettled(delivery, "dead-letter", error);
        });
  }

  /** The delivery's id, cut for a log line; never throws, for a delivery that cannot say its id. */
  static @Nullable String idForLogs(Delivery<?> delivery) {
    try {
      return LogText.cutId(delivery.id());
    } catch (RuntimeException | AssertionError | StackOverflowError e) {
      return "<id unreadable: " + LogText.cut(String.valueOf(e.getMessage())) + ">";
    }
  }

  private <T> Outcome<T> settled(Outcome<T> outcome) {
    metrics.settled(outcome);
    return outcome;
  }

  private <T> Mono<Outcome<T>> unsettled(Delivery<T> delivery, String step, Throwable error) {
    metrics.settlementFailed(delivery, step, error);
    metrics.abandoned(delivery);
    return Mono.empty();
  }
}
