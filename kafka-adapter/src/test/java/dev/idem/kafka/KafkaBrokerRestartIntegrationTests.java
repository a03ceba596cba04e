package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.testing.EmbeddedKafkaBroker;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import dev.idem.kafka.testing.TestEngine;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * The broker stops and starts again while the consumer is mid-stream: the pipeline reconnects by
 * itself, nothing is lost and nothing applied twice. Uses a private embedded broker, so that
 * stopping it disturbs no other test.
 */
class KafkaBrokerRestartIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @Test
  void consumerRidesOutABrokerRestartWithoutLosingOrDoublingAnEffect() throws Exception {
    PostgresService pg = PostgresService.get();
    String name = KafkaService.uniqueName("restart");
    String topic = name + "_topic";
    String group = name + "_group";
    String table = name + "_effects";
    pg.execute("CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, payload text NOT NULL)");
    EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.create();
    broker.start();
    ConnectionPool pool = pg.pool(8);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", broker.bootstrapServers()))) {
      admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(60, TimeUnit.SECONDS);
      publish(broker, topic, 0, 5_000);
      PostgresInbox inbox = PostgresInbox.create(pool);
      inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(name + "_consumer")
          .inbox(inbox)
          .handler((payload, tx) -> Mono.delay(Duration.ofMillis(3))
              .then(tx.sql("INSERT INTO " + table + " (message_id, payload) VALUES ($1, $2)")
                  .bind(0, tx.messageId()).bind(1, payload).execute()))
          .concurrency(4).ordering(Ordering.UNORDERED)
          .build();
      KafkaSourceOptions<String> options = TestEngine.apply(KafkaSourceOptions.<String>builder())
          .bootstrapServers(broker.bootstrapServers()).groupId(group).topics(topic)
          .valueDeserializer(new StrictUtf8Deserializer())
          .commitInterval(Duration.ofMillis(200))
          .reconnectBackoff(Duration.ofMillis(500), Duration.ofSeconds(2))
          .build();
      try (KafkaSource<String> source = KafkaSource.create(options)) {
        Disposable running = consumer.process(source.receive()).subscribe();
        try {
          await().atMost(TIMEOUT).until(() -> pg.count("SELECT count(*) FROM " + table) >= 200);
          broker.stop();
          long whileDown = pg.count("SELECT count(*) FROM " + table);
          assertThat(whileDown).as("stopped mid-stream").isLessThan(5_000);
          broker.start();
          publish(broker, topic, 5_000, 500);
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(500))
              .untilAsserted(() -> assertThat(committed(admin, group)).isEqualTo(end(admin, topic)));
        } finally {
          running.dispose();
        }
      }
      assertThat(pg.count("SELECT count(*) FROM " + table)).isEqualTo(5_500);
      assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(5_500);
    } finally {
      pool.dispose();
      broker.destroy();
    }
  }

  private static void publish(EmbeddedKafkaBroker broker, String topic, int from, int count) throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", broker.bootstrapServers());
    props.put("acks", "all");
    props.put("key.serializer", ByteArraySerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      List<Future<?>> sent = new ArrayList<>();
      for (int i = from; i < from + count; i++) {
        ProducerRecord<byte[], byte[]> record = KafkaService.record(topic, null, "key-" + (i % 7), "msg-" + i, "payload-" + i);
        sent.add(producer.send(record));
      }
      for (Future<?> f : sent) {
        f.get(60, TimeUnit.SECONDS);
      }
    }
  }

  private static Map<Integer, Long> committed(Admin admin, String group) throws Exception {
    return admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)
        .entrySet().stream().filter(e -> e.getValue() != null)
        .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset()));
  }

  private static Map<Integer, Long> end(Admin admin, String topic) throws Exception {
    Map<TopicPartition, OffsetSpec> request = Map.of(new TopicPartition(topic, 0), OffsetSpec.latest(),
        new TopicPartition(topic, 1), OffsetSpec.latest());
    return admin.listOffsets(request).all().get(30, TimeUnit.SECONDS).entrySet().stream()
        .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset()));
  }
}
