package dev.idem;

import java.io.Serial;

/**
 * Thrown (or emitted) by a handler for a message that can never succeed. The default
 * {@link ErrorClassifier} treats it, and its subclasses, as {@link ErrorKind#NON_RETRYABLE}: the
 * transaction rolls back and the message is dead-lettered without further attempts.
 */
public class NonRetryableException extends RuntimeException {

  @Serial private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message why the message cannot succeed; it becomes the dead letter's error message
   */
  public NonRetryableException(String message) {
    super(message);
  }

  /**
   * Creates the exception with a cause.
   *
   * @param message why the message cannot succeed
   * @param cause the underlying error
   */
  public NonRetryableException(String message, Throwable cause) {
    super(message, cause);
  }
}
