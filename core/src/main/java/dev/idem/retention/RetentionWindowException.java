package dev.idem.retention;

/**
 * A retention window shorter than the broker's redelivery horizon, refused when
 * {@link Retention} starts. The message names both numbers and the override.
 */
public final class RetentionWindowException extends IllegalStateException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message names the window, the horizon, where the horizon was read, and the override
   */
  public RetentionWindowException(String message) {
    super(message);
  }
}
