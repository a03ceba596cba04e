package dev.idem.kafka;

import dev.idem.kafka.internal.DeadLetterRecords;
import dev.idem.kafka.internal.MessageIds;
import dev.idem.kafka.internal.Secrets;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.jspecify.annotations.Nullable;

/**
 * Reads a dead-letter topic and puts selected records back on their original topic, for when the
 * cause of the failure was fixed.
 *
 * <pre>{@code
 * long replayed = KafkaDeadLetterReplayer.create("localhost:9092")
 *     .replay("payments.DLT", r -> "RETRIES_EXHAUSTED".equals(r.reason()));
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li>A replayed record keeps its key, value bytes and original headers, including the
 *       message id header, so the dedup contract still applies: replaying a record twice, or
 *       replaying one that was meanwhile processed, applies its effect at most once. The
 *       {@link DeadLetterHeaders} are removed.</li>
 *   <li>{@link #replay} reads the dead-letter topic from its beginning up to its end at the time
 *       of the call (no consumer group, nothing committed, the topic is left unchanged), and
 *       returns only after the broker acknowledged every republished record
 *       ({@code acks=all}, idempotent producer).</li>
 *   <li>Records without {@link DeadLetterHeaders#ORIGINAL_TOPIC} (not written by Idem) are never
 *       replayed.</li>
 * </ul>
 *
 * <p>Blocking: call it from a command or a worker thread, not from a reactive pipeline.
 * Immutable and thread-safe; each call opens and closes its own clients. Default timeout
 * {@link #DEFAULT_TIMEOUT}.
 */
public final class KafkaDeadLetterReplayer {

  /** Default longest time one {@link #read} or {@link #replay} call may take: 60 s. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(60);

  private final String bootstrapServers;
  private final Map<String, Object> clientProperties;
  private final Duration timeout;

  private KafkaDeadLetterReplayer(Builder b) {
    this.bootstrapServers = Objects.requireNonNull(b.bootstrapServers, "bootstrapServers, checked by build()");
    this.clientProperties = Collections.unmodifiableMap(new LinkedHashMap<>(b.clientProperties));
    this.timeout = b.timeout;
  }

  /**
   * A replayer with the defaults.
   *
   * @param bootstrapServers the Kafka cluster
   * @return the replayer
   */
  public static KafkaDeadLetterReplayer create(String bootstrapServers) {
    return builder().bootstrapServers(bootstrapServers).build();
  }

  /**
   * Starts a builder.
   *
   * @return a builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Reads every record of a dead-letter topic, up to its end at the time of the call.
   *
   * @param deadLetterTopic the topic
   * @return the records in partition, then offset order
   * @throws IllegalArgumentException when the topic does not exist
   * @throws IllegalStateException when reading takes longer than the timeout
   */
  public List<DeadLetterRecord> read(String deadLetterTopic) {
    List<DeadLetterRecord> records = new ArrayList<>();
    forEachRecord(deadLetterTopic, record -> records.add(toDeadLetterRecord(record)));
    return records;
  }

  /**
   * Republishes the selected records of a dead-letter topic to their original topics.
   *
   * @param deadLetterTopic the topic
   * @param selector which records to replay
   * @return how many records were republished
   * @throws IllegalArgumentException when the topic does not exist
   * @throws IllegalStateException when a publish failed or the timeout passed; records
   *     acknowledged before the failure stay published (replaying them again is harmless)
   */
  public long replay(String deadLetterTopic, Predicate<? super DeadLetterRecord> selector) {
    Objects.requireNonNull(selector, "selector");
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProperties())) {
      forEachRecord(deadLetterTopic, record -> {
        DeadLetterRecord letter = toDeadLetterRecord(record);
        if (letter.originalTopic() != null && selector.test(letter)) {
          sent.add(producer.send(DeadLetterRecords.replayRecord(record, letter.originalTopic())));
        }
      });
      producer.flush();
      for (Future<RecordMetadata> future : sent) {
        future.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while replaying " + deadLetterTopic, e);
    } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("Replaying " + deadLetterTopic + " failed: " + e, e);
    }
    return sent.size();
  }

  private void forEachRecord(String topic, java.util.function.Consumer<ConsumerRecord<byte[], byte[]>> action) {
    Objects.requireNonNull(topic, "deadLetterTopic");
    long deadline = System.nanoTime() + timeout.toNanos();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties())) {
      List<PartitionInfo> infos = consumer.partitionsFor(topic, timeout);
      if (infos == null || infos.isEmpty()) {
        throw new IllegalArgumentException("Dead-letter topic " + topic + " does not exist");
      }
      List<TopicPartition> partitions = infos.stream().map(i -> new TopicPartition(i.topic(), i.partition()))
          .sorted(java.util.Comparator.comparingInt(TopicPartition::partition)).toList();
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
      for (TopicPartition tp : partitions) {
        List<ConsumerRecord<byte[], byte[]>> ofPartition = new ArrayList<>();
        long target = end.getOrDefault(tp, 0L);
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
        while (consumer.position(tp, timeout) < target) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("Reading " + tp + " did not reach offset " + target + " within " + timeout);
          }
          for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200)).records(tp)) {
            if (record.offset() < target) {
              ofPartition.add(record);
            }
          }
        }
        ofPartition.forEach(action);
      }
    }
  }

  static DeadLetterRecord toDeadLetterRecord(ConsumerRecord<byte[], byte[]> record) {
    Map<String, String> headers = new LinkedHashMap<>();
    for (Header h : record.headers()) {
      headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
    }
    return new DeadLetterRecord(record.topic(), record.partition(), record.offset(), record.key(), record.value(),
        Collections.unmodifiableMap(headers),
        MessageIds.lastHeader(record.headers(), DeadLetterHeaders.MESSAGE_ID),
        headers.get(DeadLetterHeaders.ORIGINAL_TOPIC),
        parseInt(headers.get(DeadLetterHeaders.ORIGINAL_PARTITION)),
        parseLong(headers.get(DeadLetterHeaders.ORIGINAL_OFFSET)),
        headers.get(DeadLetterHeaders.CONSUMER),
        headers.get(DeadLetterHeaders.REASON),
        headers.get(DeadLetterHeaders.ERROR_CLASS),
        headers.get(DeadLetterHeaders.ERROR_MESSAGE),
        parseInt(headers.get(DeadLetterHeaders.ATTEMPTS)));
  }

  private static int parseInt(@Nullable String s) {
    try {
      return s == null ? -1 : Integer.parseInt(s);
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private static long parseLong(@Nullable String s) {
    try {
      return s == null ? -1 : Long.parseLong(s);
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private Map<String, Object> consumerProperties() {
    Map<String, Object> props = new HashMap<>(clientProperties);
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.remove(ConsumerConfig.GROUP_ID_CONFIG);
    return props;
  }

  private Map<String, Object> producerProperties() {
    Map<String, Object> props = new HashMap<>(clientProperties);
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    return props;
  }

  @Override
  public String toString() {
    return "KafkaDeadLetterReplayer[bootstrapServers=" + bootstrapServers + ", timeout=" + timeout
        + ", clientProperties=" + Secrets.mask(clientProperties) + "]";
  }

  /** Configures a {@link KafkaDeadLetterReplayer}. Not thread-safe. */
  public static final class Builder {
    private @Nullable String bootstrapServers;
    private final Map<String, Object> clientProperties = new LinkedHashMap<>();
    private Duration timeout = DEFAULT_TIMEOUT;

    private Builder() {}

    /**
     * The Kafka cluster. Required.
     *
     * @param bootstrapServers comma-separated {@code host:port} pairs
     * @return this builder
     */
    public Builder bootstrapServers(String bootstrapServers) {
      Objects.requireNonNull(bootstrapServers, "bootstrapServers");
      if (bootstrapServers.isBlank()) {
        throw new IllegalArgumentException("bootstrapServers must not be blank");
      }
      this.bootstrapServers = bootstrapServers;
      return this;
    }

    /**
     * A property applied to both the reading consumer and the republishing producer (security
     * settings). The replayer owns the serializers, {@code acks} and idempotence.
     *
     * @param name the property
     * @param value its value
     * @return this builder
     */
    public Builder clientProperty(String name, Object value) {
      clientProperties.put(Objects.requireNonNull(name, "clientProperty name"),
          Objects.requireNonNull(value, "clientProperty value"));
      return this;
    }

    /**
     * The longest time one call may take. Default 60 s.
     *
     * @param timeout positive
     * @return this builder
     */
    public Builder timeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("timeout must be positive, was " + timeout);
      }
      this.timeout = timeout;
      return this;
    }

    /**
     * Validates and builds.
     *
     * @return the replayer
     * @throws IllegalArgumentException when bootstrapServers is missing
     */
    public KafkaDeadLetterReplayer build() {
      if (bootstrapServers == null) {
        throw new IllegalArgumentException("bootstrapServers is required");
      }
      return new KafkaDeadLetterReplayer(this);
    }
  }
}
