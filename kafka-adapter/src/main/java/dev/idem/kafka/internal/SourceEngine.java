package dev.idem.kafka.internal;

import dev.idem.Delivery;
import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaSourceOptions;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * The machinery behind {@link dev.idem.kafka.KafkaSource}: the engine that receives records
 * ({@link NativeReceiver} or {@link ReactorKafkaReceiver}), decoding, id resolution, commit holds
 * and the dead-letter producer.
 *
 * @param <T> the payload type
 */
public final class SourceEngine<T> implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(SourceEngine.class);

  private final KafkaSourceOptions<T> options;
  private final RecordReceiver receiver;
  private final RecordDecoder<T> decoder;
  private final DeadLetterPublisher publisher;
  /** The commit holds of the live consumers, one per {@link #receive()} subscription. */
  private final Set<CommitHolds> liveHolds = ConcurrentHashMap.newKeySet();
  private final Runnable deadLetterFailed;

  /**
   * @param options validated options
   * @throws IllegalStateException when {@link KafkaEngine#REACTOR_KAFKA} is selected and
   *     reactor-kafka is missing or kafka-clients is not 3.x
   */
  public SourceEngine(KafkaSourceOptions<T> options) {
    this.options = options;
    this.decoder = new RecordDecoder<>(options);
    Map<String, Object> consumerProperties = consumerProperties(options);
    this.receiver = options.engine() == KafkaEngine.REACTOR_KAFKA
        ? ReactorKafkaSupport.receiver(options, consumerProperties)
        : new NativeReceiver(options, consumerProperties, consumerMetrics(options));
    this.publisher = DeadLetterPublisher.forSource(options);
    this.deadLetterFailed = options.meterRegistry() == null
        ? () -> {}
        : MicrometerBinding.bindHolds(options.meterRegistry(), options.groupId(), this);
  }

  private static Function<Consumer<byte[], byte[]>, AutoCloseable> consumerMetrics(KafkaSourceOptions<?> options) {
    Object registry = options.meterRegistry();
    return registry == null ? consumer -> null : consumer -> MicrometerBinding.bind(consumer, registry, options.groupId());
  }

  /**
   * The partitions whose commits are held by a record whose dead letter failed for good, over
   * every live consumer of this source.
   *
   * @return how many
   */
  public int heldPartitions() {
    return liveHolds.stream().mapToInt(CommitHolds::heldPartitions).sum();
  }

  static Map<String, Object> consumerProperties(KafkaSourceOptions<?> options) {
    Map<String, Object> props = new HashMap<>(options.consumerProperties());
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, options.groupId());
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, options.prefetch());
    props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, KafkaSourceOptions.DEFAULT_AUTO_OFFSET_RESET);
    // Records of aborted producer transactions must never be applied.
    props.putIfAbsent(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    // The consumer rebalance protocol of Kafka 4 (group.protocol=consumer) assigns on the broker
    // and refuses a client-side assignor.
    Object protocol = props.get("group.protocol");
    if (protocol == null || !"consumer".equalsIgnoreCase(protocol.toString())) {
      props.putIfAbsent(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
    }
    return props;
  }

  static Map<String, Object> producerProperties(KafkaSourceOptions<?> options) {
    Map<String, Object> props = new HashMap<>(options.producerProperties());
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "idem-dlt-" + options.groupId());
    return props;
  }

  /**
   * A new consumer per subscription, recreated with backoff after consumer errors (a WARN line
   * per attempt). An invalid consumer configuration ends the stream: recreating cannot fix it.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    return recreatedOnFailure(Flux.defer(this::receiveWithOneConsumer), options, "Kafka source");
  }

  /**
   * {@code consumer} resubscribed with the options' backoff after it failed (a WARN line per
   * attempt), except for an invalid consumer configuration, which recreating cannot fix: that
   * ends the stream with an {@link IllegalArgumentException} naming it.
   */
  static <R> Flux<R> recreatedOnFailure(Flux<R> consumer, KafkaSourceOptions<?> options, String kind) {
    return consumer
        .retryWhen(Retry.backoff(Long.MAX_VALUE, options.reconnectBackoff())
            .maxBackoff(options.reconnectMaxBackoff())
            .filter(error -> configError(error) == null && !(error instanceof Error))
            .doBeforeRetry(signal -> log.warn("{} '{}' failed, recreating the consumer (attempt {}): {}", kind,
                options.groupId(), signal.totalRetriesInARow() + 1, LogText.error(signal.failure())))
            .onRetryExhaustedThrow((spec, signal) -> signal.failure()))
        .onErrorMap(error -> configError(error) != null, error -> new IllegalArgumentException(kind + " '"
            + options.groupId() + "' cannot create its consumer: "
            + Objects.requireNonNull(configError(error), "matched above").getMessage(), error));
  }

  /** The configuration error behind {@code error}, or {@code null}: recreating the consumer cannot fix one. */
  static @Nullable ConfigException configError(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof ConfigException config) {
        return config;
      }
    }
    return null;
  }

  private Flux<Delivery<T>> receiveWithOneConsumer() {
    CommitHolds holds = new CommitHolds(options.groupId(), deadLetterFailed);
    liveHolds.add(holds);
    long every = options.heldCommitsLogInterval().toMillis();
    Disposable reports = Schedulers.parallel().schedulePeriodically(holds::report, every, every, TimeUnit.MILLISECONDS);
    return receiver.receive(holds)
        .map(received -> toDelivery(received.record(), received.settle(), holds))
        .doFinally(signal -> {
          reports.dispose();
          holds.close();
          liveHolds.remove(holds);
        });
  }

  Delivery<T> toDelivery(ConsumerRecord<byte[], byte[]> record, Runnable settle, CommitHolds holds) {
    return new KafkaDelivery<>(record, settle, decoder.decode(record), publisher, holds);
  }

  /**
   * Waits (up to the close timeout) until the consumers cancelled before committed their settled
   * offsets and closed, then closes the dead-letter producer.
   */
  @Override
  public void close() {
    try {
      receiver.close();
    } finally {
      publisher.close();
    }
  }
}
