package dev.idem.rabbit;

import dev.idem.retention.RedeliveryHorizon;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The redelivery horizon of a RabbitMQ queue for {@code dev.idem.retention.Retention}: its
 * message TTL, where one is set. A message older than the TTL is dropped (or dead-lettered) by
 * the broker, so it cannot be delivered again after that.
 *
 * <p>AMQP cannot read a queue's arguments or policies back, so the TTL comes from the arguments
 * the application declares the queue with ({@link #fromQueueArguments}, reading
 * {@code x-message-ttl}), or is named explicitly ({@link #messageTtl}, for a TTL set by a policy).
 * A queue without a TTL keeps messages without a time bound; RabbitMQ itself redelivers an
 * unacknowledged message at once (when its channel closes), so the horizon is reported as
 * unknown: retention starts and logs a WARN saying that the window must exceed how long a
 * duplicate can wait in the queue. Immutable.
 */
public final class RabbitRedeliveryHorizon implements RedeliveryHorizon {

  /** The queue argument that sets a message TTL in milliseconds. */
  public static final String MESSAGE_TTL_ARGUMENT = "x-message-ttl";

  private final String queue;
  private final @Nullable Duration ttl;

  private RabbitRedeliveryHorizon(String queue, @Nullable Duration ttl) {
    this.queue = Objects.requireNonNull(queue, "queue");
    this.ttl = ttl;
  }

  /**
   * The horizon from the arguments a queue is declared with.
   *
   * @param queue the queue name
   * @param arguments its declaration arguments; {@code x-message-ttl} (a number of milliseconds)
   *     when set
   * @return the horizon
   * @throws IllegalArgumentException when {@code x-message-ttl} is not a non-negative number
   */
  public static RabbitRedeliveryHorizon fromQueueArguments(String queue, Map<String, Object> arguments) {
    Objects.requireNonNull(arguments, "arguments");
    Object value = arguments.get(MESSAGE_TTL_ARGUMENT);
    if (value == null) {
      return new RabbitRedeliveryHorizon(queue, null);
    }
    if (!(value instanceof Number number) || number.longValue() < 0) {
      throw new IllegalArgumentException(
          MESSAGE_TTL_ARGUMENT + " of queue '" + queue + "' must be a non-negative number of ms, was " + value);
    }
    return new RabbitRedeliveryHorizon(queue, Duration.ofMillis(number.longValue()));
  }

  /**
   * A queue whose message TTL is known (for example set by a policy).
   *
   * @param queue the queue name
   * @param ttl the TTL, zero or more
   * @return the horizon
   */
  public static RabbitRedeliveryHorizon messageTtl(String queue, Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.isNegative()) {
      throw new IllegalArgumentException("ttl must not be negative, was " + ttl);
    }
    return new RabbitRedeliveryHorizon(queue, ttl);
  }

  @Override
  public Mono<Horizon> horizon() {
    return Mono.just(ttl == null
        ? Horizon.unknown("queue '" + queue + "' has no message TTL, so a duplicate can wait in it without a time bound")
        : Horizon.bounded(ttl, "queue '" + queue + "' " + MESSAGE_TTL_ARGUMENT + "=" + ttl.toMillis()));
  }

  @Override
  public String toString() {
    return "RabbitRedeliveryHorizon[queue=" + queue + ", ttl=" + ttl + "]";
  }
}
