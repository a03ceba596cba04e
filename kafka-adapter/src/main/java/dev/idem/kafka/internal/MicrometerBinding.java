package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSource;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.binder.kafka.KafkaClientMetrics;
import java.util.List;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.producer.Producer;

/**
 * Binds Kafka client metrics to Micrometer (its {@link KafkaClientMetrics} binder, meters named
 * {@code kafka.consumer.*} and {@code kafka.producer.*}, tagged {@value #TAG} with the group id).
 * Kept in its own class so that Micrometer is loaded only when the application passes a registry.
 */
final class MicrometerBinding {

  static final String TAG = "idem.source";

  private MicrometerBinding() {}

  /**
   * Binds a consumer's metrics until the returned handle is closed.
   *
   * @return closes the binding
   */
  static AutoCloseable bind(Consumer<?, ?> consumer, Object registry, String consumerName) {
    KafkaClientMetrics metrics = new KafkaClientMetrics(consumer, List.of(Tag.of(TAG, consumerName)));
    metrics.bindTo((MeterRegistry) registry);
    return metrics;
  }

  /**
   * Binds a producer's metrics until the returned handle is closed.
   *
   * @return closes the binding
   */
  static AutoCloseable bind(Producer<?, ?> producer, Object registry, String consumerName) {
    KafkaClientMetrics metrics = new KafkaClientMetrics(producer, List.of(Tag.of(TAG, consumerName)));
    metrics.bindTo((MeterRegistry) registry);
    return metrics;
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
}
