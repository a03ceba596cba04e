package dev.idem.kafka.internal;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
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
import reactor.core.publisher.Mono;

/**
 * One Kafka record as a {@link dev.idem.Delivery}. Acknowledging marks its offset settled in its
 * engine's out-of-order commit tracker: the offset is committed once it and every earlier offset
 * of its partition are settled. Dead-lettering publishes to the dead-letter topic and
 * settles the offset only after the broker acknowledged that publish; a publish that failed for
 * good (after the publisher's retries of retriable errors) fails the settlement with a
 * {@link DeadLetterFailedException}, leaves the offset unsettled and holds its partition's
 * commits, which {@link CommitHolds} reports.
 *
 * @param <T> the payload type
 */
public final class KafkaDelivery<T> extends AbstractDelivery<T> {

  private final ConsumerRecord<byte[], byte[]> record;
  private final Runnable settle;
  private final String id;
  private final String invalidId;
  private final T payload;
  private final Throwable decodingFailure;
  private final DeadLetterPublisher publisher;
  private final CommitHolds holds;

  KafkaDelivery(ConsumerRecord<byte[], byte[]> record, Runnable settle, String id, String invalidId, T payload,
      Throwable decodingFailure, DeadLetterPublisher publisher, CommitHolds holds) {
    this.record = record;
    this.settle = settle;
    this.id = id;
    this.invalidId = invalidId;
    this.payload = payload;
    this.decodingFailure = decodingFailure;
    this.publisher = publisher;
    this.holds = holds;
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
  public String id() {
    if (invalidId != null) {
      throw new IllegalArgumentException("invalid message id of " + record.topic() + "-" + record.partition() + "@"
          + record.offset() + ": " + invalidId);
    }
    return id;
  }

  @Override
  public T payload() {
    return payload;
  }

  @Override
  public Throwable decodingFailure() {
    return decodingFailure;
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
    byte[] key = record.key();
    return key == null ? partition() : new String(key, StandardCharsets.UTF_8);
  }

  /** The record key as UTF-8 (decoded leniently), or {@code null} for a record without a key. */
  @Override
  public String key() {
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
  public Instant timestamp() {
    return record.timestampType() == TimestampType.NO_TIMESTAMP_TYPE || record.timestamp() < 0 ? null : Instant.ofEpochMilli(record.timestamp());
  }

  /**
   * The raw record.
   *
   * @return the record with key and value bytes
   */
  public ConsumerRecord<byte[], byte[]> record() {
    return record;
  }

  @Override
  protected Mono<Void> doAck() {
    return Mono.fromRunnable(settle);
  }

  /**
   * Publishes the dead letter, then settles the offset. A publish that failed for good fails
   * with a {@link DeadLetterFailedException} (a {@link dev.idem.NonRetryableException}: the
   * publisher already retried what can be retried), logs it at ERROR and holds the partition's
   * commits at this record.
   */
  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return publisher.publish(record, id, deadLetter)
        .onErrorMap(error -> !(error instanceof DeadLetterFailedException), error -> {
          String topic = publisher.deadLetterTopic(record.topic());
          holds.deadLetterFailed(record, idForLogs(), topic, error);
          return new DeadLetterFailedException("the dead letter of " + record.topic() + "-" + record.partition() + "@"
              + record.offset() + " failed for good on " + topic + ": " + LogText.error(error), error);
        })
        .then(Mono.fromRunnable(() -> {
          settle.run();
          holds.settled(record);
        }));
  }

  private String idForLogs() {
    return invalidId != null ? "<invalid: " + invalidId + ">" : id;
  }

  @Override
  public String toString() {
    return "KafkaDelivery[" + record.topic() + "-" + record.partition() + "@" + record.offset() + ", id=" + LogText.id(idForLogs()) + "]";
  }
}
