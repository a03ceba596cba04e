package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSource;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import java.util.List;
import reactor.kafka.receiver.MicrometerConsumerListener;
import reactor.kafka.receiver.ReceiverOptions;
import reactor.kafka.sender.MicrometerProducerListener;
import reactor.kafka.sender.SenderOptions;

/**
 * Binds Kafka client metrics to Micrometer. Kept in its own class so that Micrometer is loaded
 * only when the application passes a registry.
 */
final class MicrometerBinding {

  private static final String TAG = "idem.source";

  private MicrometerBinding() {}

  static <K, V> ReceiverOptions<K, V> bind(ReceiverOptions<K, V> options, Object registry, String consumerName) {
    return options.consumerListener(new MicrometerConsumerListener((MeterRegistry) registry, List.of(Tag.of(TAG, consumerName))));
  }

  /**
   * Registers the adapter's own meters: a counter of dead letters that failed for good and a
   * gauge of the partitions whose commits they hold.
   *
   * @param source the state the gauge reads, held weakly like every Micrometer gauge's
   * @return what counts one dead letter that failed for good
   */
  static Runnable bindHolds(Object registry, String consumerName, SourceEngine<?> source) {
    MeterRegistry meters = (MeterRegistry) registry;
    Counter failed = Counter.builder(KafkaSource.FAILED_DEAD_LETTERS_METRIC).tag(TAG, consumerName)
        .description("Records whose dead letter failed for good; each holds its partition's commits").register(meters);
    Gauge.builder(KafkaSource.HELD_PARTITIONS_METRIC, source, SourceEngine::heldPartitions).tag(TAG, consumerName)
        .description("Partitions whose commits are held by a record whose dead letter failed for good")
        .register(meters);
    return failed::increment;
  }

  static <K, V> SenderOptions<K, V> bind(SenderOptions<K, V> options, Object registry, String consumerName) {
    return options.producerListener(new MicrometerProducerListener((MeterRegistry) registry, List.of(Tag.of(TAG, consumerName))));
  }
}
