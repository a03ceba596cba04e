package dev.idem;

import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * What happened to one message. The pipeline emits an outcome only after the message was settled
 * with the broker, so downstream of {@link IdempotentConsumer#process} every outcome is final.
 *
 * @param status processed, duplicate or dead-lettered
 * @param delivery the settled delivery
 * @param deadLetter why it was dead-lettered, or {@code null} for the other statuses
 * @param attempts processing attempts made for this delivery (0 for rejected bad input)
 * @param <T> the payload type
 */
public record Outcome<T>(Status status, Delivery<T> delivery, @Nullable DeadLetter deadLetter, int attempts) {

  /**
   * Validates the components.
   *
   * @param status processed, duplicate or dead-lettered
   * @param delivery the settled delivery
   * @param deadLetter why it was dead-lettered, or {@code null} for the other statuses
   * @param attempts processing attempts made for this delivery (0 for rejected bad input)
   */
  public Outcome {
    Objects.requireNonNull(status, "status");
    Objects.requireNonNull(delivery, "delivery");
    if ((status == Status.DEAD_LETTERED) != (deadLetter != null)) {
      throw new IllegalArgumentException("deadLetter must be set exactly for DEAD_LETTERED outcomes");
    }
  }

  /** The final state of a message. */
  public enum Status {
    /** The handler's effect and the dedup row committed; the message was acknowledged. */
    PROCESSED,
    /** The id was already recorded; the message was acknowledged without running the handler. */
    DUPLICATE,
    /** The message went to the dead-letter destination and was acknowledged. */
    DEAD_LETTERED
  }

  /**
   * The message id, for logs.
   *
   * <p>Never throws: for a dead letter whose delivery cannot say its id (malformed id bytes,
   * say) it returns {@code null}, like for a message without an id; the dead letter's detail
   * says what was wrong.
   *
   * @return the delivery's id, or {@code null} for a dead-lettered message without a readable one
   */
  public @Nullable String messageId() {
    try {
      return delivery.id();
    } catch (RuntimeException e) {
      return null;
    }
  }
}
