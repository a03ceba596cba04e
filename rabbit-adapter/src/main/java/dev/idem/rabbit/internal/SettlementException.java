package dev.idem.rabbit.internal;

import dev.idem.internal.LogText;
import org.jspecify.annotations.Nullable;

/**
 * A delivery could not be settled with the broker; the message says whether the broker will
 * redeliver it. Its trigger's text is cut to {@value LogText#MAX_TEXT} characters. Deliberately carries its trigger as a
 * suppressed exception, not as the cause: core's error classifier walks the cause chain and would
 * call an {@link java.io.IOException} cause an infrastructure error, retrying a settlement that
 * can never succeed (its channel is gone; the broker redelivers the message instead).
 */
public final class SettlementException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what failed
   * @param trigger the underlying error, kept as suppressed, may be {@code null}
   */
  public SettlementException(String message, @Nullable Throwable trigger) {
    super(message + (trigger == null ? "" : ": " + LogText.error(trigger)));
    if (trigger != null) {
      addSuppressed(trigger);
    }
  }
}
