package dev.idem.kafka.internal;

import dev.idem.kafka.MessageIdExtractor;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Resolves a record's message id: the extractor when one is configured, else the id header;
 * when neither yields a non-blank id, {@code topic/partition/offset} if the fallback is on.
 *
 * @param <T> the payload type
 */
public final class MessageIds<T> {

  private final String header;
  private final MessageIdExtractor<T> extractor;
  private final boolean offsetFallback;

  /**
   * @param header the id header
   * @param extractor the extractor, or {@code null}
   * @param offsetFallback whether to fall back to {@code topic/partition/offset}
   */
  public MessageIds(String header, MessageIdExtractor<T> extractor, boolean offsetFallback) {
    this.header = header;
    this.extractor = extractor;
    this.offsetFallback = offsetFallback;
  }

  /**
   * Resolves the id.
   *
   * @param record the raw record
   * @param payload the decoded payload or {@code null}
   * @return the id, or {@code null} when there is none and the fallback is off
   */
  public String resolve(ConsumerRecord<byte[], byte[]> record, T payload) {
    String id = extractor != null ? extractor.messageId(record, payload) : lastHeader(record.headers(), header);
    if (id != null && !id.isBlank()) {
      return id;
    }
    return offsetFallback ? offsetId(record.topic(), record.partition(), record.offset()) : null;
  }

  /**
   * The fallback id.
   *
   * @param topic the topic
   * @param partition the partition
   * @param offset the offset
   * @return {@code topic/partition/offset}
   */
  public static String offsetId(String topic, int partition, long offset) {
    return topic + "/" + partition + "/" + offset;
  }

  /**
   * The last value of a header as UTF-8.
   *
   * @param headers the headers
   * @param name the header name
   * @return the value, or {@code null} when absent or valueless
   */
  public static String lastHeader(Headers headers, String name) {
    Header h = headers.lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }
}
