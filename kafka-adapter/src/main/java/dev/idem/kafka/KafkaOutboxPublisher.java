package dev.idem.kafka;

import dev.idem.kafka.internal.ProducerSends;
import dev.idem.kafka.internal.Secrets;
import dev.idem.outbox.OutboxMessage;
import dev.idem.outbox.OutboxPublisher;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * An {@link OutboxPublisher} that sends outbox rows to Kafka, for {@code dev.idem.outbox.OutboxRelay}.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder(outbox, KafkaOutboxPublisher.create("localhost:9092")).build();
 * }</pre>
 *
 * <p>Guarantees: a message counts as sent only when the broker acknowledged it with
 * {@code acks=all} on an idempotent producer ({@code enable.idempotence=true}, which keeps the
 * order of one partition across the producer's own retries). The row's destination is the topic,
 * its key the record key (so rows of one key go to one partition), its payload the value, its
 * headers text headers, and its stable id the {@value #DEFAULT_MESSAGE_ID_HEADER} header, which
 * {@link KafkaSource} reads by default: an Idem consumer downstream deduplicates a row the relay
 * sends twice. A batch is sent as one stream of records on one producer and each record's result
 * reported on its own. Defaults: {@code delivery.timeout.ms} 25 s (below the relay's 30 s publish
 * timeout, so the producer gives up before the relay does), {@code max.block.ms} 10 s; other
 * producer properties may be added and override these.
 *
 * <p>Thread-safe; {@link #close()} closes the producer.
 */
public final class KafkaOutboxPublisher implements OutboxPublisher, AutoCloseable {

  /** The header that carries the row's id: {@value}, as {@link KafkaSource} expects. */
  public static final String DEFAULT_MESSAGE_ID_HEADER = KafkaSourceOptions.DEFAULT_MESSAGE_ID_HEADER;

  private final ProducerSends sender;
  private final String messageIdHeader;
  private final Map<String, Object> properties;

  private KafkaOutboxPublisher(Builder b) {
    this.messageIdHeader = b.messageIdHeader;
    Map<String, Object> props = new HashMap<>();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 25_000);
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000);
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "idem-outbox-relay");
    props.putAll(b.producerProperties);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    this.properties = Collections.unmodifiableMap(new LinkedHashMap<>(props));
    this.sender = new ProducerSends(new KafkaProducer<>(props), "outbox");
  }

  /**
   * A publisher with the defaults.
   *
   * @param bootstrapServers the Kafka cluster
   * @return the publisher; close it when the relay stops
   */
  public static KafkaOutboxPublisher create(String bootstrapServers) {
    return builder(bootstrapServers).build();
  }

  /**
   * Starts a builder.
   *
   * @param bootstrapServers the Kafka cluster, not blank
   * @return a builder
   */
  public static Builder builder(String bootstrapServers) {
    return new Builder(bootstrapServers);
  }

  @Override
  public Mono<Void> publish(OutboxMessage message) {
    return sender.send(record(message)).then();
  }

  @Override
  public Flux<Result> publishAll(List<OutboxMessage> messages) {
    // Every record is handed to the producer at once (in order, on its sending thread), so the
    // batch travels in few requests; each result is reported on its own, in the batch's order.
    return Flux.fromIterable(messages)
        .flatMapSequential(m -> sender.send(record(m))
            .map(sent -> Result.sent(m))
            .onErrorResume(error -> Mono.just(Result.failed(m, error))), Math.max(1, messages.size()));
  }

  ProducerRecord<byte[], byte[]> record(OutboxMessage message) {
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(message.destination(), null,
        message.key() == null ? null : message.key().getBytes(StandardCharsets.UTF_8), message.payload());
    message.headers().forEach((name, value) -> {
      if (!name.equals(messageIdHeader)) {
        record.headers().add(name, value.getBytes(StandardCharsets.UTF_8));
      }
    });
    record.headers().add(messageIdHeader, message.id().getBytes(StandardCharsets.UTF_8));
    return record;
  }

  @Override
  public void close() {
    sender.close();
  }

  @Override
  public String toString() {
    return "KafkaOutboxPublisher[messageIdHeader=" + messageIdHeader + ", producer=" + Secrets.mask(properties) + "]";
  }

  /** Configures a {@link KafkaOutboxPublisher}; setters check their argument and name it in the error. */
  public static final class Builder {
    private final String bootstrapServers;
    private String messageIdHeader = DEFAULT_MESSAGE_ID_HEADER;
    private final Map<String, Object> producerProperties = new LinkedHashMap<>();

    private Builder(String bootstrapServers) {
      if (bootstrapServers == null || bootstrapServers.isBlank()) {
        throw new IllegalArgumentException("bootstrapServers must not be blank");
      }
      this.bootstrapServers = bootstrapServers;
    }

    /**
     * The header that carries the row's id. Default {@value KafkaOutboxPublisher#DEFAULT_MESSAGE_ID_HEADER}.
     *
     * @param header not blank
     * @return this builder
     */
    public Builder messageIdHeader(String header) {
      if (header == null || header.isBlank()) {
        throw new IllegalArgumentException("messageIdHeader must not be blank");
      }
      this.messageIdHeader = header;
      return this;
    }

    /**
     * A producer property (security, compression, ...). {@code acks} and idempotence may be
     * overridden here, at the cost of the guarantees above.
     *
     * @param name the property
     * @param value its value
     * @return this builder
     */
    public Builder producerProperty(String name, Object value) {
      producerProperties.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(value, "value of " + name));
      return this;
    }

    /**
     * Builds the publisher (the producer connects lazily).
     *
     * @return the publisher
     */
    public KafkaOutboxPublisher build() {
      return new KafkaOutboxPublisher(this);
    }
  }
}
