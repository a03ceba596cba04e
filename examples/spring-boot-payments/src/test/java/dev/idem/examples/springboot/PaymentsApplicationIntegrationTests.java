package dev.idem.examples.springboot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.kafka.testing.KafkaService;
import dev.idem.spring.IdemConsumers;
import dev.idem.spring.ManagedConsumer;
import dev.idem.testing.PostgresService;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The example application as it ships (its {@code application.yml}, Spring Boot's own dependency
 * versions: kafka-clients 4.1.x, no version property), against the real PostgreSQL and a real Kafka broker
 * (the Idem build's in-JVM KRaft broker unless one listens on 127.0.0.1:9092): payments published
 * with 10% repeats are applied once each, every offset is committed and health is UP. The graceful
 * stop with the context is {@link PaymentsShutdownIntegrationTests}.
 */
@SpringBootTest
@DirtiesContext
class PaymentsApplicationIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final KafkaService KAFKA = KafkaService.get();
  private static final String TOPIC = KafkaService.uniqueName("spring_payments");
  private static final String GROUP = TOPIC + "_group";
  private static final int PAYMENTS = 500;

  @DynamicPropertySource
  static void services(DynamicPropertyRegistry registry) {
    KAFKA.createTopic(TOPIC, 3);
    KAFKA.createTopic(TOPIC + ".DLT", 1);
    registry.add("spring.r2dbc.url", PG::url);
    registry.add("spring.kafka.bootstrap-servers", KAFKA::bootstrapServers);
    registry.add("idem.consumers.payments.source.topics", () -> TOPIC);
    registry.add("idem.consumers.payments.source.group-id", () -> GROUP);
    registry.add("idem.consumers.payments.source.dead-letter-topic", () -> TOPIC + ".DLT");
  }

  @Autowired ApplicationContext context;
  @Autowired IdemConsumers consumers;
  @Autowired MeterRegistry meters;

  @Test
  void everyPaymentIsAppliedOnceOffsetsAreCommittedAndHealthIsUp() {
    // The consumer already runs; nothing is on the new topic yet.
    PG.execute("DELETE FROM payments", "UPDATE accounts SET balance = 0");
    Random random = new Random(42);
    Map<Long, Long> expected = new HashMap<>();
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < PAYMENTS; i++) {
      long account = 1 + random.nextInt(20);
      long amount = 1 + random.nextInt(10_000);
      expected.merge(account, amount, Long::sum);
      ProducerRecord<byte[], byte[]> record = KafkaService.record(TOPIC, null, Long.toString(account), TOPIC + "-" + i,
          "{\"accountId\":" + account + ",\"amountCents\":" + amount + "}");
      records.add(record);
      if (i % 10 == 0) {
        records.add(record);
      }
    }
    KAFKA.sendAll(records);

    ManagedConsumer payments = consumers.consumer("payments").orElseThrow();
    await().atMost(KafkaService.timeout()).untilAsserted(() -> {
      assertThat(PG.count("SELECT count(*) FROM payments")).isEqualTo(PAYMENTS);
      assertThat(KAFKA.committedOffsets(GROUP, TOPIC)).isEqualTo(KAFKA.endOffsets(TOPIC));
    });
    assertThat(PG.count("SELECT count(DISTINCT event_id) FROM payments")).isEqualTo(PAYMENTS);
    for (Map.Entry<Long, Long> account : expected.entrySet()) {
      assertThat(PG.count("SELECT balance FROM accounts WHERE id = $1", account.getKey()))
          .as("balance of account %d", account.getKey()).isEqualTo(account.getValue());
    }
    assertThat(PG.count("SELECT coalesce(sum(balance), 0) FROM accounts"))
        .isEqualTo(expected.values().stream().mapToLong(Long::longValue).sum());
    HealthIndicator health = (HealthIndicator) context.getBean("idemHealthContributor", CompositeHealthContributor.class)
        .getContributor("payments");
    assertThat(health.health().getStatus()).isEqualTo(Status.UP);
    assertThat(KAFKA.readAll(TOPIC + ".DLT")).isEmpty();
    assertThat(payments.state()).isEqualTo(ManagedConsumer.State.RUNNING);
    // The consumer's meters on the application's registry.
    assertThat(meters.get("idem.messages").tag("consumer", "payments").tag("outcome", "processed").counter().count())
        .isEqualTo(PAYMENTS);
    assertThat(meters.get("idem.messages").tag("consumer", "payments").tag("outcome", "duplicate").counter().count())
        .isGreaterThanOrEqualTo(PAYMENTS / 10);
  }
}
