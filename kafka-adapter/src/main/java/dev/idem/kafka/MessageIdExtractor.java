package dev.idem.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jspecify.annotations.Nullable;

/**
 * Derives the deduplication key of a Kafka record, for example a domain key from the payload
 * ("order 42 was paid") so that two producers publishing the same business event are applied
 * once.
 *
 * <p>Called once per record on the receiving thread; it must be fast, side-effect free and
 * thread-safe. When it returns {@code null} or a blank string, the source falls back to
 * {@code topic/partition/offset} (see {@link KafkaSourceOptions.Builder#offsetFallbackId}).
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface MessageIdExtractor<T> {

  /**
   * Extracts the id.
   *
   * @param record the raw record (key and value as bytes, headers)
   * @param payload the decoded payload, or {@code null} when the value could not be decoded or
   *     was {@code null}
   * @return the message id, or {@code null} for none
   */
  @Nullable
  String messageId(ConsumerRecord<byte[], byte[]> record, @Nullable T payload);
}
