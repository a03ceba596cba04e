package dev.idem;

/** The categories of messages that cannot succeed and are dead-lettered instead. */
public enum DeadLetterReason {
  /** The message carries no id, or a blank one. */
  MISSING_ID("message has no id"),
  /** The id is longer than the consumer accepts. */
  INVALID_ID("message id is invalid"),
  /** The message has no payload. */
  MISSING_PAYLOAD("message has no payload"),
  /** The payload could not be decoded (a poison pill). */
  UNDECODABLE_PAYLOAD("payload could not be decoded"),
  /** The handler failed with an error classified {@link ErrorKind#NON_RETRYABLE}. */
  NON_RETRYABLE_ERROR("handler failed with a non-retryable error"),
  /** The handler kept failing with a retryable error until the retry policy gave up. */
  RETRIES_EXHAUSTED("handler failed on every attempt");

  private final String description;

  DeadLetterReason(String description) {
    this.description = description;
  }

  /**
   * A short phrase for logs and headers.
   *
   * @return the description
   */
  public String description() {
    return description;
  }
}
