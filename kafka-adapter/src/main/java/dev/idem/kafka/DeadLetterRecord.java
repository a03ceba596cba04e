package dev.idem.kafka;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * One record read from a dead-letter topic, with its {@link DeadLetterHeaders} decoded, for
 * selecting what {@link KafkaDeadLetterReplayer} republishes.
 *
 * @param topic the dead-letter topic
 * @param partition the partition in the dead-letter topic
 * @param offset the offset in the dead-letter topic
 * @param key the original key bytes, or {@code null}
 * @param value the original value bytes, or {@code null}
 * @param headers every header as UTF-8, the last value of each name
 * @param messageId the message id the consumer used, or {@code null}
 * @param originalTopic the topic it was consumed from, or {@code null} when the record was not
 *     written by Idem
 * @param originalPartition its original partition, or -1
 * @param originalOffset its original offset, or -1
 * @param consumer the consumer name that gave up on it, or {@code null}
 * @param reason the {@link dev.idem.DeadLetterReason} name, or {@code null}
 * @param errorClass the error class, or {@code null}
 * @param errorMessage the error message, or {@code null}
 * @param attempts processing attempts made, or -1 when unknown
 */
public record DeadLetterRecord(
    String topic,
    int partition,
    long offset,
    byte @Nullable [] key,
    byte @Nullable [] value,
    Map<String, String> headers,
    @Nullable String messageId,
    @Nullable String originalTopic,
    int originalPartition,
    long originalOffset,
    @Nullable String consumer,
    @Nullable String reason,
    @Nullable String errorClass,
    @Nullable String errorMessage,
    int attempts) {

  /**
   * The value decoded as UTF-8, for display and simple predicates.
   *
   * @return the text, or empty when there is no value
   */
  public Optional<String> valueAsString() {
    return value == null ? Optional.empty() : Optional.of(new String(value, StandardCharsets.UTF_8));
  }

  /**
   * The key decoded as UTF-8.
   *
   * @return the text, or empty when there is no key
   */
  public Optional<String> keyAsString() {
    return key == null ? Optional.empty() : Optional.of(new String(key, StandardCharsets.UTF_8));
  }

  @Override
  public String toString() {
    return "DeadLetterRecord[" + topic + "-" + partition + "@" + offset + ", messageId=" + messageId
        + ", original=" + originalTopic + "-" + originalPartition + "@" + originalOffset + ", consumer=" + consumer
        + ", reason=" + reason + ", error=" + errorClass + ": " + errorMessage + ", attempts=" + attempts + "]";
  }
}
