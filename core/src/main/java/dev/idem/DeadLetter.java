package dev.idem;

import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Why a message was dead-lettered, with what an operator needs to inspect and replay it.
 *
 * @param reason the category of failure
 * @param detail a human-readable explanation, never {@code null}
 * @param errorClass the class name of the error that caused it, or {@code null}
 * @param errorMessage the message of that error, or {@code null}
 * @param consumer the consumer name that gave up on the message
 * @param attempts how many processing attempts were made in this delivery (0 when the message
 *     was rejected before processing)
 */
public record DeadLetter(
    DeadLetterReason reason,
    String detail,
    @Nullable String errorClass,
    @Nullable String errorMessage,
    String consumer,
    int attempts) {

  /**
   * Validates the components.
   *
   * @param reason the category of failure
   * @param detail a human-readable explanation, never {@code null}
   * @param errorClass the class name of the error that caused it, or {@code null}
   * @param errorMessage the message of that error, or {@code null}
   * @param consumer the consumer name that gave up on the message
   * @param attempts how many processing attempts were made in this delivery (0 when the message
   *     was rejected before processing)
   */
  public DeadLetter {
    Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(detail, "detail");
    Objects.requireNonNull(consumer, "consumer");
  }

  /**
   * Creates a dead letter caused by an error.
   *
   * @param reason the category
   * @param error the cause
   * @param consumer the consumer name
   * @param attempts processing attempts made
   * @return the dead letter, its detail naming the reason and the error
   */
  public static DeadLetter of(DeadLetterReason reason, Throwable error, String consumer, int attempts) {
    String message = error.getMessage();
    String detail = reason.description() + ": " + error.getClass().getName() + (message == null ? "" : ": " + message);
    return new DeadLetter(reason, detail, error.getClass().getName(), message, consumer, attempts);
  }

  /**
   * Creates a dead letter for a message rejected before processing.
   *
   * @param reason the category
   * @param detail what is wrong with the message
   * @param consumer the consumer name
   * @return the dead letter
   */
  public static DeadLetter rejected(DeadLetterReason reason, String detail, String consumer) {
    return new DeadLetter(reason, reason.description() + ": " + detail, null, null, consumer, 0);
  }
}
