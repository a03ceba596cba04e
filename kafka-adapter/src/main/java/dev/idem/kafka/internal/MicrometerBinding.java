package dev.idem.kafka.internal;

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

  private MicrometerBinding() {}

  static <K, V> ReceiverOptions<K, V> bind(ReceiverOptions<K, V> options, Object registry, String consumerName) {
    return options.consumerListener(new MicrometerConsumerListener((MeterRegistry) registry, List.of(Tag.of("idem.source", consumerName))));
  }

  static <K, V> SenderOptions<K, V> bind(SenderOptions<K, V> options, Object registry, String consumerName) {
    return options.producerListener(new MicrometerProducerListener((MeterRegistry) registry, List.of(Tag.of("idem.source", consumerName))));
  }
}
