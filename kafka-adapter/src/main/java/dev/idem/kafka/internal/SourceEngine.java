package dev.idem.kafka.internal;

import dev.idem.Delivery;
import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaSourceOptions;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;
import reactor.kafka.receiver.KafkaReceiver;
import reactor.kafka.receiver.ReceiverOptions;
import reactor.kafka.receiver.ReceiverPartition;
import reactor.kafka.receiver.ReceiverRecord;
import reactor.kafka.sender.KafkaSender;
import reactor.kafka.sender.SenderOptions;
import reactor.util.retry.Retry;

/**
 * The machinery behind {@link dev.idem.kafka.KafkaSource}: Reactor Kafka receiver options with
 * out-of-order commit tracking, decoding, id resolution and the dead-letter producer.
 *
 * @param <T> the payload type
 */
public final class SourceEngine<T> implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(SourceEngine.class);

  private final KafkaSourceOptions<T> options;
  private final ReceiverOptions<byte[], byte[]> receiverOptions;
  private final MessageIds<T> ids;
  private final DeadLetterPublisher publisher;
  /** The commit holds of the live consumers, one per {@link #receive()} subscription. */
  private final Set<CommitHolds> liveHolds = ConcurrentHashMap.newKeySet();
  private final Runnable deadLetterFailed;
  private final CommitOnCancel commitOnCancel;

  /**
   * @param options validated options
   */
  public SourceEngine(KafkaSourceOptions<T> options) {
    this.options = options;
    this.ids = new MessageIds<>(options.messageIdHeader(), options.messageIdExtractor(), options.offsetFallbackId());
    this.receiverOptions = receiverOptions(options);
    this.publisher = new DeadLetterPublisher(KafkaSender.create(senderOptions(options)), options::deadLetterTopic,
        options.messageIdHeader(), options.reconnectBackoff(), options.reconnectMaxBackoff());
    this.commitOnCancel = new CommitOnCancel(options.groupId(), options.closeTimeout());
    this.deadLetterFailed = options.meterRegistry() == null ? () -> { }
        : MicrometerBinding.bindHolds(options.meterRegistry(), options.groupId(), this);
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

  static <T> ReceiverOptions<byte[], byte[]> receiverOptions(KafkaSourceOptions<T> options) {
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
    props.putIfAbsent(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
    String name = options.groupId();
    ReceiverOptions<byte[], byte[]> receiver = ReceiverOptions.<byte[], byte[]>create(props)
        .subscription(options.topics())
        .commitInterval(options.commitInterval())
        .commitBatchSize(options.commitBatchSize())
        .maxDeferredCommits(options.maxDeferredCommits())
        .maxDelayRebalance(options.revocationGracePeriod())
        .commitIntervalDuringDelay(100L)
        .closeTimeout(options.closeTimeout())
        .addAssignListener(partitions -> log.info("Kafka source '{}' assigned {}", name, names(partitions)))
        .addRevokeListener(partitions -> log.info("Kafka source '{}' revoked {}", name, names(partitions)));
    if (options.meterRegistry() != null) {
      receiver = MicrometerBinding.bind(receiver, options.meterRegistry(), name);
    }
    return receiver;
  }

  static <T> SenderOptions<byte[], byte[]> senderOptions(KafkaSourceOptions<T> options) {
    Map<String, Object> props = new HashMap<>(options.producerProperties());
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "idem-dlt-" + options.groupId());
    SenderOptions<byte[], byte[]> sender = SenderOptions.<byte[], byte[]>create(props).stopOnError(false);
    if (options.meterRegistry() != null) {
      sender = MicrometerBinding.bind(sender, options.meterRegistry(), options.groupId());
    }
    return sender;
  }

  private static String names(Collection<ReceiverPartition> partitions) {
    return partitions.stream().map(p -> p.topicPartition().toString()).sorted().toList().toString();
  }

  /**
   * A new consumer per subscription, recreated with backoff after fatal consumer errors.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    return Flux.defer(this::receiveWithOneConsumer)
        .retryWhen(Retry.backoff(Long.MAX_VALUE, options.reconnectBackoff())
            .maxBackoff(options.reconnectMaxBackoff())
            .doBeforeRetry(signal -> log.warn("Kafka source '{}' failed, recreating the consumer (attempt {}): {}",
                options.groupId(), signal.totalRetriesInARow() + 1, LogText.error(signal.failure()))));
  }

  private Flux<Delivery<T>> receiveWithOneConsumer() {
    CommitHolds holds = new CommitHolds(options.groupId(), deadLetterFailed);
    liveHolds.add(holds);
    ReceiverOptions<byte[], byte[]> consumerOptions = receiverOptions.addRevokeListener(partitions ->
        holds.revoked(partitions.stream().map(ReceiverPartition::topicPartition).toList()));
    long every = options.heldCommitsLogInterval().toMillis();
    Disposable reports = Schedulers.parallel().schedulePeriodically(holds::report, every, every, TimeUnit.MILLISECONDS);
    CommitOnCancel.Acked acked = new CommitOnCancel.Acked();
    return commitOnCancel.apply(KafkaReceiver.create(consumerOptions).receive(1), acked)
        .map(record -> toDelivery(record, holds, acked))
        .doFinally(signal -> {
          reports.dispose();
          holds.close();
          liveHolds.remove(holds);
        });
  }

  Delivery<T> toDelivery(ReceiverRecord<byte[], byte[]> record, CommitHolds holds) {
    return toDelivery(record, holds, new CommitOnCancel.Acked());
  }

  Delivery<T> toDelivery(ReceiverRecord<byte[], byte[]> record, CommitHolds holds, CommitOnCancel.Acked acked) {
    T payload = null;
    Throwable failure = null;
    if (record.value() != null) {
      try {
        payload = options.valueDeserializer().deserialize(record.topic(), record.headers(), record.value());
      } catch (Throwable e) {
        // Any Throwable makes the record a poison pill, JVM errors included: an AssertionError, the
        // StackOverflowError of a recursive parser, the OutOfMemoryError of a decoder that trusts a
        // corrupt length field, a LinkageError. Reactor would rethrow those from map(), killing the
        // receiver's thread, or fail the stream, which redelivers the same record in an endless loop.
        failure = e;
        if (e instanceof Error) {
          log.warn("Value deserializer threw {} on {}-{}@{}; the record is a poison pill: {}", e.getClass().getName(),
              record.topic(), record.partition(), record.offset(), LogText.error(e));
        }
      }
    }
    String id = null;
    String invalidId = null;
    try {
      id = ids.resolve(record, payload);
    } catch (MessageIds.InvalidIdException e) {
      invalidId = e.getMessage();
    } catch (Throwable e) {
      // The application's extractor; whatever it throws, Errors included, must not stop the stream.
      log.warn("Message id extractor failed on {}-{}@{}; using the fallback: {}", record.topic(), record.partition(), record.offset(),
          LogText.error(e));
      id = options.offsetFallbackId() ? MessageIds.offsetId(record.topic(), record.partition(), record.offset()) : null;
    }
    return new KafkaDelivery<>(record, record.receiverOffset(), id, invalidId, payload, failure, publisher, holds, acked);
  }

  /**
   * Waits (up to the close timeout) until the consumers cancelled before committed their
   * acknowledged offsets, then closes the dead-letter producer.
   */
  @Override
  public void close() {
    commitOnCancel.awaitCommits(options.closeTimeout());
    publisher.close();
  }
}
