package dev.idem.kafka.internal;

import dev.idem.NonRetryableException;
import java.io.Serial;

/**
 * A dead letter that the broker refused for good (a record too large for the dead-letter
 * topic, a producer not authorised to write it): retrying the same publish cannot succeed, so it
 * is non-retryable. The record stays unsettled and is redelivered after a restart or rebalance.
 */
public final class DeadLetterFailedException extends NonRetryableException {

  @Serial private static final long serialVersionUID = 1L;

  DeadLetterFailedException(String message, Throwable cause) {
    super(message, cause);
  }
}
