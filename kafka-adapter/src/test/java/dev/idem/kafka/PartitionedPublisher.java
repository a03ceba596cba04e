package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.kafka.testing.KafkaService;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Publishes the native engine tests' records: spread round-robin over a topic's partitions, with an idempotent producer. */
final class PartitionedPublisher {

  private PartitionedPublisher() {}

  /** Records spread round-robin over the partitions, ids {@code prefix + i}. */
  static List<ProducerRecord<byte[], byte[]>> records(String topic, int partitions, String prefix, int count) {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      records.add(KafkaService.record(topic, i % partitions, "key-" + i, prefix + i, "payload-" + prefix + i));
    }
    return records;
  }

  static void publish(String bootstrapServers, String topic, int partitions, String prefix, int count) throws Exception {
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProperties(bootstrapServers))) {
      List<CompletableFuture<Void>> sent = new ArrayList<>();
      for (ProducerRecord<byte[], byte[]> record : records(topic, partitions, prefix, count)) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        producer.send(record, (metadata, error) -> {
          if (error == null) {
            done.complete(null);
          } else {
            done.completeExceptionally(error);
          }
        });
        sent.add(done);
      }
      producer.flush();
      CompletableFuture.allOf(sent.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
    }
  }

  /** One producer, large batches, asynchronous sends and one flush: a million records in seconds. */
  static void publishBacklog(String bootstrapServers, String topic, int count, int partitions) throws Exception {
    Properties props = producerProperties(bootstrapServers);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 20);
    props.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
    props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, 64L * 1024 * 1024);
    AtomicLong acknowledged = new AtomicLong();
    AtomicReference<Exception> failure = new AtomicReference<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (int i = 0; i < count; i++) {
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, i % partitions, null,
            ("p" + i).getBytes(StandardCharsets.UTF_8));
        record.headers().add("message-id", ("m" + i).getBytes(StandardCharsets.UTF_8));
        producer.send(record, (metadata, error) -> {
          if (error == null) {
            acknowledged.incrementAndGet();
          } else {
            failure.compareAndSet(null, error);
          }
        });
      }
      producer.flush();
    }
    assertThat(failure.get()).isNull();
    assertThat(acknowledged.get()).isEqualTo(count);
  }

  static Properties producerProperties(String bootstrapServers) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return props;
  }
}
