package dev.idem.kafka.internal;

import dev.idem.DeadLetter;
import dev.idem.kafka.DeadLetterHeaders;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.jspecify.annotations.Nullable;

/** Builds dead-letter records and the records that replay them. Pure functions. */
public final class DeadLetterRecords {

  /** Longest detail or error message header, in characters: {@value}. Error texts can be huge; a dead letter must still fit {@code max.message.bytes}. */
  public static final int MAX_TEXT_HEADER_LENGTH = 1_000;

  private DeadLetterRecords() {}

  /** The text, or its first characters and {@code "..."} in {@link #MAX_TEXT_HEADER_LENGTH} characters; never splits a surrogate pair. */
  static @Nullable String truncate(@Nullable String text) {
    if (text == null || text.length() <= MAX_TEXT_HEADER_LENGTH) {
      return text;
    }
    int end = MAX_TEXT_HEADER_LENGTH - 3;
    if (Character.isHighSurrogate(text.charAt(end - 1))) {
      end--;
    }
    return text.substring(0, end) + "...";
  }

  /**
   * The dead-letter record of a consumed record: same key and value bytes, the original headers
   * (earlier dead-letter headers replaced), the id in the id header, and the
   * {@link DeadLetterHeaders}.
   *
   * @param deadLetterTopic the destination
   * @param original the consumed record
   * @param messageId the id the consumer used, or {@code null}
   * @param idHeader the consumer's id header
   * @param deadLetter why
   * @return the record to publish
   */
  public static ProducerRecord<byte[], byte[]> deadLetterRecord(String deadLetterTopic, ConsumerRecord<byte[], byte[]> original,
      @Nullable String messageId, String idHeader, DeadLetter deadLetter) {
    Headers headers = new RecordHeaders();
    for (Header h : original.headers()) {
      if (!h.key().startsWith(DeadLetterHeaders.PREFIX) && !(messageId != null && h.key().equals(idHeader))) {
        headers.add(h.key(), h.value());
      }
    }
    if (messageId != null) {
      put(headers, idHeader, messageId);
      put(headers, DeadLetterHeaders.MESSAGE_ID, messageId);
    }
    put(headers, DeadLetterHeaders.ORIGINAL_TOPIC, original.topic());
    put(headers, DeadLetterHeaders.ORIGINAL_PARTITION, Integer.toString(original.partition()));
    put(headers, DeadLetterHeaders.ORIGINAL_OFFSET, Long.toString(original.offset()));
    put(headers, DeadLetterHeaders.CONSUMER, deadLetter.consumer());
    put(headers, DeadLetterHeaders.REASON, deadLetter.reason().name());
    put(headers, DeadLetterHeaders.DETAIL, truncate(deadLetter.detail()));
    put(headers, DeadLetterHeaders.ERROR_CLASS, deadLetter.errorClass());
    put(headers, DeadLetterHeaders.ERROR_MESSAGE, truncate(deadLetter.errorMessage()));
    put(headers, DeadLetterHeaders.ATTEMPTS, Integer.toString(deadLetter.attempts()));
    return new ProducerRecord<>(deadLetterTopic, null, null, original.key(), original.value(), headers);
  }

  /**
   * The record that puts a dead letter back on its original topic: same key, value and id
   * header, without the dead-letter headers.
   *
   * @param deadLetter a record read from a dead-letter topic
   * @param originalTopic the topic to publish to
   * @return the record to publish
   */
  public static ProducerRecord<byte[], byte[]> replayRecord(ConsumerRecord<byte[], byte[]> deadLetter, String originalTopic) {
    Headers headers = new RecordHeaders();
    for (Header h : deadLetter.headers()) {
      if (!h.key().startsWith(DeadLetterHeaders.PREFIX)) {
        headers.add(h.key(), h.value());
      }
    }
    return new ProducerRecord<>(originalTopic, null, null, deadLetter.key(), deadLetter.value(), headers);
  }

  private static void put(Headers headers, String name, @Nullable String value) {
    if (value != null) {
      headers.remove(name);
      headers.add(name, value.getBytes(StandardCharsets.UTF_8));
    }
  }
}
