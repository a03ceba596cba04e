package dev.idem.kafka.internal;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import reactor.core.publisher.Mono;
import reactor.kafka.receiver.ReceiverOffset;

/**
 * One Kafka record as a {@link dev.idem.Delivery}. Acknowledging marks its offset settled in
 * Reactor Kafka's out-of-order commit tracker: the offset is committed once it and every earlier
 * offset of its partition are settled. Dead-lettering publishes to the dead-letter topic and
 * settles the offset only after the broker acknowledged that publish.
 *
 * @param <T> the payload type
 */
public final class KafkaDelivery<T> extends AbstractDelivery<T> {

  private final ConsumerRecord<byte[], byte[]> record;
  private final ReceiverOffset offset;
  private final String id;
  private final T payload;
  private final Throwable decodingFailure;
  private final DeadLetterPublisher publisher;

  KafkaDelivery(ConsumerRecord<byte[], byte[]> record, ReceiverOffset offset, String id, T payload,
      Throwable decodingFailure, DeadLetterPublisher publisher) {
    this.record = record;
    this.offset = offset;
    this.id = id;
    this.payload = payload;
    this.decodingFailure = decodingFailure;
    this.publisher = publisher;
  }

  @Override
  public String id() {
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

  /** The record key as UTF-8, or the partition when the record has no key, so that keyless records stay in partition order. */
  @Override
  public String orderingKey() {
    byte[] key = record.key();
    return key == null ? partition() : new String(key, StandardCharsets.UTF_8);
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
    return Mono.fromRunnable(offset::acknowledge);
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return publisher.publish(record, id, deadLetter).then(Mono.fromRunnable(offset::acknowledge));
  }

  @Override
  public String toString() {
    return "KafkaDelivery[" + record.topic() + "-" + record.partition() + "@" + record.offset() + ", id=" + id + "]";
  }
}
