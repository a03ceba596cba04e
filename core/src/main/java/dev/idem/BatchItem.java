package dev.idem;

/**
 * One message of a batch as a {@link BatchHandler} sees it.
 *
 * @param messageId the message id (the dedup key); a stable idempotency key
 * @param payload the decoded payload, never {@code null}
 * @param delivery the delivery, for its metadata (headers, key, timestamp); do not settle it
 * @param <T> the payload type
 */
public record BatchItem<T>(String messageId, T payload, Delivery<T> delivery) {

  /**
   * The message's metadata (headers, key, partition, timestamp, attempt, broker coordinates).
   *
   * @return the metadata of {@link #delivery()}
   */
  public MessageMetadata metadata() {
    return MessageMetadata.of(delivery);
  }
}
