package dev.idem.examples.refunds;

import dev.idem.Delivery;
import dev.idem.kafka.KafkaOutboxPublisher;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.outbox.OutboxPublisher;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import reactor.core.publisher.Flux;

/** The refund example on Kafka: a refunds topic and a notifications topic. */
final class KafkaRefundBroker implements RefundBroker {

  private final String bootstrapServers;
  private final String run;
  private final String refundsTopic;
  private final String notificationsTopic;
  private final List<AutoCloseable> resources = new ArrayList<>();

  KafkaRefundBroker(String bootstrapServers, String run) {
    this.bootstrapServers = bootstrapServers;
    this.run = run;
    this.refundsTopic = "idem-demo-refunds-" + run;
    this.notificationsTopic = "idem-demo-notifications-" + run;
    try (Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers))) {
      admin.createTopics(List.of(new NewTopic(refundsTopic, 3, (short) 1), new NewTopic(notificationsTopic, 3, (short) 1)))
          .all().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("Could not create the example's topics on Kafka at " + bootstrapServers + ": " + e, e);
    }
  }

  @Override
  public void publishRefunds(List<RefundEvent> events) {
    Map<String, Object> props = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers, ProducerConfig.ACKS_CONFIG,
        "all",
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props, new ByteArraySerializer(),
        new ByteArraySerializer())) {
      List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
      for (RefundEvent event : events) {
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(refundsTopic,
            event.refundId().getBytes(StandardCharsets.UTF_8),
            Long.toString(event.amountCents()).getBytes(StandardCharsets.UTF_8));
        record.headers().add(KafkaSourceOptions.DEFAULT_MESSAGE_ID_HEADER, event.refundId().getBytes(StandardCharsets.UTF_8));
        sent.add(producer.send(record));
      }
      for (java.util.concurrent.Future<?> f : sent) {
        f.get(60, TimeUnit.SECONDS);
      }
    } catch (Exception e) {
      throw new IllegalStateException("Could not publish refunds to Kafka at " + bootstrapServers + ": " + e, e);
    }
  }

  @Override
  public Flux<Delivery<String>> refunds() {
    return source(refundsTopic, "idem-demo-refunds-" + run);
  }

  @Override
  public String notificationsDestination() {
    return notificationsTopic;
  }

  @Override
  public OutboxPublisher publisher() {
    KafkaOutboxPublisher publisher = KafkaOutboxPublisher.create(bootstrapServers);
    resources.add(publisher);
    return publisher;
  }

  @Override
  public Flux<Delivery<String>> notifications() {
    return source(notificationsTopic, "idem-demo-notification-sender-" + run);
  }

  private Flux<Delivery<String>> source(String topic, String group) {
    KafkaSource<String> source = KafkaSource.create(KafkaSourceOptions.<String>builder()
        .bootstrapServers(bootstrapServers).groupId(group).topics(topic)
        .valueDeserializer(new StringDeserializer())
        .build());
    resources.add(source);
    return source.receive();
  }

  @Override
  public void close() {
    for (AutoCloseable resource : resources) {
      try {
        resource.close();
      } catch (Exception e) {
        System.err.println("[refunds] closing " + resource + " failed: " + e);
      }
    }
  }
}
