package dev.idem.spring.internal;

import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.spring.ConsumerSource;
import dev.idem.spring.IdemProperties;
import dev.idem.spring.MessageDecoder;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;

/** Kafka sources from configuration (consumer groups and share groups); loaded only when a consumer's source type is kafka or kafka-share. */
final class KafkaSources {

  private KafkaSources() {}

  static Supplier<ConsumerSource<Object>> source(String at, String name, IdemProperties.Source s,
      @Nullable String bootstrapServers,
      int prefetch, MessageDecoder<Object> decoder, @Nullable Object meterRegistry) {
    if (bootstrapServers == null || bootstrapServers.isBlank()) {
      throw new IllegalArgumentException(at + ".source.bootstrap-servers is required (or spring.kafka.bootstrap-servers)");
    }
    if (s.getTopics().isEmpty()) {
      throw new IllegalArgumentException(at + ".source.topics is required: name at least one topic");
    }
    Deserializer<Object> values = (topic, data) -> {
      try {
        return decoder.decode(data);
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new IllegalArgumentException(e.toString(), e);
      }
    };
    KafkaSourceOptions.Builder<Object> options = KafkaSourceOptions.builder()
        .bootstrapServers(bootstrapServers)
        .groupId(s.getGroupId() != null ? s.getGroupId() : name)
        .topics(s.getTopics().toArray(String[]::new))
        .valueDeserializer(values)
        .prefetch(prefetch);
    if (s.getEngine() != null) {
      // REACTOR_KAFKA without reactor-kafka, or on kafka-clients 4.x: KafkaSource.create refuses it
      // when the consumer starts, which fails the application's start.
      options.engine(KafkaEngine.valueOf(s.getEngine().name()));
    }
    if (s.getMessageIdHeader() != null) {
      options.messageIdHeader(s.getMessageIdHeader());
    }
    if (s.getDeadLetterTopic() != null && s.getDeadLetterTopicSuffix() != null) {
      throw new IllegalArgumentException(at + ".source: set dead-letter-topic or dead-letter-topic-suffix, not both");
    }
    if (s.getDeadLetterTopic() != null) {
      String topic = s.getDeadLetterTopic();
      options.deadLetterTopic(ignored -> topic);
    }
    if (s.getDeadLetterTopicSuffix() != null) {
      options.deadLetterTopicSuffix(s.getDeadLetterTopicSuffix());
    }
    for (Map.Entry<String, String> property : s.getProperties().entrySet()) {
      options.consumerProperty(property.getKey(), property.getValue());
    }
    if (meterRegistry != null) {
      options.meterRegistry((io.micrometer.core.instrument.MeterRegistry) meterRegistry);
    }
    KafkaSourceOptions<Object> built = options.build();
    if (s.getType() == IdemProperties.SourceType.KAFKA_SHARE) {
      int consumers = s.getShareConsumers() != null ? s.getShareConsumers() : KafkaShareSource.DEFAULT_CONSUMERS;
      if (consumers < 1) {
        throw new IllegalArgumentException(at + ".source.share-consumers must be at least 1, was " + consumers);
      }
      // On kafka-clients older than 4.1 KafkaShareSource.create refuses, naming the versions, when the consumer starts.
      return () -> {
        KafkaShareSource<Object> share = KafkaShareSource.create(built, consumers);
        return ConsumerSource.of(share::receive, share);
      };
    }
    return () -> {
      KafkaSource<Object> kafka = KafkaSource.create(built);
      return ConsumerSource.of(kafka::receive, kafka);
    };
  }
}
