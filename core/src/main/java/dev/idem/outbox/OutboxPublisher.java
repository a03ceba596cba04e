package dev.idem.outbox;

import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Sends outbox messages to their destination for an {@link OutboxRelay}: a broker (the Kafka and
 * RabbitMQ adapters ship one each), a webhook, an e-mail provider.
 *
 * <p>Contract: {@link #publish} completes only after the destination confirmed the message
 * (a broker acknowledgement, a 2xx answer), and errors otherwise; the relay marks a row sent only
 * after that. Send {@link OutboxMessage#id()} with the message (as its message id, or as the
 * provider's idempotency key): the relay is at least once, and that id is what lets the receiver
 * drop a second copy. A publisher need not retry; the relay retries failed rows with backoff.
 *
 * <p>The relay guards the calls: an exception thrown by a publisher, or an {@link Error} other
 * than a JVM error, fails the messages concerned (they are retried, then parked); a JVM error
 * ({@link VirtualMachineError}, {@link LinkageError}) ends the relay's stream with that error
 * and leaves the rows unsent.
 */
@FunctionalInterface
public interface OutboxPublisher {

  /**
   * Sends one message.
   *
   * @param message the message, with its stable id
   * @return completes when the destination confirmed the message
   */
  Mono<Void> publish(OutboxMessage message);

  /**
   * Sends a batch and reports each message's result. The default calls {@link #publish} for all of
   * them at once (the relay's batch size bounds how many) and reports each as it finishes;
   * brokers override it to pipeline the batch on one channel or producer. A message without a
   * result when the returned {@code Flux} ends counts as failed.
   *
   * @param messages the batch, in sequence order; never empty
   * @return one result per message, in any order
   */
  default Flux<Result> publishAll(List<OutboxMessage> messages) {
    return Flux.fromIterable(messages)
        .flatMap(message -> Mono.defer(() -> publish(message))
            .then(Mono.just(Result.sent(message)))
            .onErrorResume(error -> Mono.just(Result.failed(message, error))), Math.max(1, messages.size()));
  }

  /**
   * What happened to one message of a batch.
   *
   * @param message the message
   * @param error why it failed, or {@code null} when the destination confirmed it
   */
  record Result(OutboxMessage message, @Nullable Throwable error) {

    /**
     * A confirmed message.
     *
     * @param message the message
     * @return the result
     */
    public static Result sent(OutboxMessage message) {
      return new Result(message, null);
    }

    /**
     * A failed message.
     *
     * @param message the message
     * @param error why, not {@code null}
     * @return the result
     */
    public static Result failed(OutboxMessage message, Throwable error) {
      return new Result(message, java.util.Objects.requireNonNull(error, "error"));
    }

    /**
     * Whether the destination confirmed the message.
     *
     * @return {@code true} when sent
     */
    public boolean isSent() {
      return error == null;
    }
  }
}
