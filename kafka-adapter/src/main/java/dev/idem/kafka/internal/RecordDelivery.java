package dev.idem.kafka.internal;

import dev.idem.AbstractDelivery;
import dev.idem.MessageMetadata;
import dev.idem.internal.LogText;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.jspecify.annotations.Nullable;

/**
 * What a Kafka record says as a {@link dev.idem.Delivery}, whichever group read it: the decoded
 * payload and id, headers, key, partition, timestamp and coordinates. {@link KafkaDelivery} (a
 * consumer group) and {@link ShareDelivery} (a share group) add how it is settled.
 *
 * @param <T> the payload type
 */
public abstract class RecordDelivery<T> extends AbstractDelivery<T> {

  private final ConsumerRecord<byte[], byte[]> record;
  private final RecordDecoder.Decoded<T> decoded;
  private @Nullable String orderingKey;

  RecordDelivery(ConsumerRecord<byte[], byte[]> record, RecordDecoder.Decoded<T> decoded) {
    this.record = record;
    this.decoded = decoded;
  }

  /**
   * The message id.
   *
   * @return the id, or {@code null} when the record has none
   * @throws IllegalArgumentException when the id header is not UTF-8 or appears several times
   *     with different values; the pipeline dead-letters such a record as
   *     {@link dev.idem.DeadLetterReason#INVALID_ID}, its headers kept byte for byte
   */
  @Override
  public @Nullable String id() {
    if (decoded.invalidId() != null) {
      throw new IllegalArgumentException("invalid message id of " + coordinates() + ": " + decoded.invalidId());
    }
    return decoded.id();
  }

  @Override
  public @Nullable T payload() {
    return decoded.payload();
  }

  @Override
  public @Nullable Throwable decodingFailure() {
    return decoded.decodingFailure();
  }

  @Override
  public Map<String, String> headers() {
    Map<String, String> headers = new LinkedHashMap<>();
    for (Header h : record.headers()) {
      headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
    }
    return Collections.unmodifiableMap(headers);
  }

  /**
   * The record key as UTF-8, or the partition when the record has no key, so that keyless
   * records stay in partition order. Keys that are not UTF-8 are decoded with replacement
   * characters, so distinct keys can share an ordering key ({@code FF 41} and {@code FE 41} both
   * become U+FFFD followed by {@code A}): that only serializes them as if they were one key; records of
   * one key always get the same ordering key, so their order is never broken.
   */
  @Override
  public String orderingKey() {
    String key = orderingKey;
    if (key == null) {
      // Decoded once: the pipeline asks for it more than once (a racing second decode gives an equal string).
      byte[] bytes = record.key();
      key = bytes == null ? partition() : new String(bytes, StandardCharsets.UTF_8);
      orderingKey = key;
    }
    return key;
  }

  /** The record key as UTF-8 (decoded leniently), or {@code null} for a record without a key. */
  @Override
  public @Nullable String key() {
    byte[] key = record.key();
    return key == null ? null : new String(key, StandardCharsets.UTF_8);
  }

  /**
   * {@value dev.idem.MessageMetadata#KAFKA_TOPIC}, {@value dev.idem.MessageMetadata#KAFKA_PARTITION}
   * and {@value dev.idem.MessageMetadata#KAFKA_OFFSET} of the record.
   */
  @Override
  public Map<String, String> brokerCoordinates() {
    return Map.of(MessageMetadata.KAFKA_TOPIC, record.topic(),
        MessageMetadata.KAFKA_PARTITION, Integer.toString(record.partition()),
        MessageMetadata.KAFKA_OFFSET, Long.toString(record.offset()));
  }

  /** {@code topic-partition}, for example {@code orders-3}. */
  @Override
  public String partition() {
    return record.topic() + "-" + record.partition();
  }

  @Override
  public @Nullable Instant timestamp() {
    return record.timestampType() == TimestampType.NO_TIMESTAMP_TYPE || record.timestamp() < 0
        ? null
        : Instant.ofEpochMilli(record.timestamp());
  }

  /**
   * The raw record.
   *
   * @return the record with key and value bytes
   */
  public ConsumerRecord<byte[], byte[]> record() {
    return record;
  }

  /** The id as the logs show it. */
  @Nullable
  String idForLogs() {
    return decoded.invalidId() != null ? "<invalid: " + decoded.invalidId() + ">" : decoded.id();
  }

  /** {@code topic-partition@offset}. */
  String coordinates() {
    return record.topic() + "-" + record.partition() + "@" + record.offset();
  }

  /** The decoded id, {@code null} when the record has none or it is invalid. */
  @Nullable
  String decodedId() {
    return decoded.id();
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[" + coordinates() + ", id=" + LogText.id(idForLogs()) + "]";
  }
}
