package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSourceOptions;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.kafka.receiver.KafkaReceiver;
import reactor.kafka.receiver.MicrometerConsumerListener;
import reactor.kafka.receiver.ReceiverOffset;
import reactor.kafka.receiver.ReceiverOptions;
import reactor.kafka.receiver.ReceiverPartition;

/**
 * The Reactor Kafka engine ({@link dev.idem.kafka.KafkaEngine#REACTOR_KAFKA}): Reactor Kafka's
 * receiver with its out-of-order commit tracking (deferred commits). The only class, with
 * {@link CommitOnCancel}, that touches reactor-kafka, so that the library runs without it when
 * this engine is not selected.
 */
final class ReactorKafkaReceiver implements RecordReceiver {

  private static final Logger log = LoggerFactory.getLogger(ReactorKafkaReceiver.class);

  private final ReceiverOptions<byte[], byte[]> receiverOptions;
  private final CommitOnCancel commitOnCancel;
  private final KafkaSourceOptions<?> options;

  ReactorKafkaReceiver(KafkaSourceOptions<?> options, Map<String, Object> consumerProperties) {
    this.options = options;
    String name = options.groupId();
    ReceiverOptions<byte[], byte[]> receiver = ReceiverOptions.<byte[], byte[]>create(consumerProperties)
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
      receiver = receiver.consumerListener(new MicrometerConsumerListener((MeterRegistry) options.meterRegistry(),
          List.of(Tag.of(MicrometerBinding.TAG, name))));
    }
    this.receiverOptions = receiver;
    this.commitOnCancel = new CommitOnCancel(name, options.closeTimeout());
  }

  private static String names(Collection<ReceiverPartition> partitions) {
    return partitions.stream().map(p -> p.topicPartition().toString()).sorted().toList().toString();
  }

  @Override
  public Flux<Received> receive(CommitHolds holds) {
    ReceiverOptions<byte[], byte[]> consumerOptions = receiverOptions
        .addRevokeListener(partitions -> holds.revoked(partitions.stream().map(ReceiverPartition::topicPartition).toList()));
    CommitOnCancel.Acked acked = new CommitOnCancel.Acked();
    return commitOnCancel.apply(KafkaReceiver.create(consumerOptions).receive(1), acked)
        .map(record -> {
          ReceiverOffset offset = record.receiverOffset();
          return new Received(record, () -> {
            offset.acknowledge();
            acked.acknowledged(offset);
          });
        });
  }

  @Override
  public void close() {
    commitOnCancel.awaitCommits(options.closeTimeout());
  }
}
