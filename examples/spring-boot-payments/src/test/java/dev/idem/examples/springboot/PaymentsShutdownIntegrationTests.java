package dev.idem.examples.springboot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.ShutdownReport;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.spring.IdemConsumers;
import dev.idem.spring.ManagedConsumer;
import dev.idem.testing.PostgresService;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The example application started as {@code main} starts it, then closed the way a deploy stops it:
 * the consumer stops taking messages, what is in flight commits within the grace period (nothing
 * abandoned), the consumer reports STOPPED, and a new instance then applies the rest: each
 * payment once, every offset committed.
 * (A {@code @SpringBootTest} cannot close its own context: Spring's test context cache restarts it.)
 */
class PaymentsShutdownIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final KafkaService KAFKA = KafkaService.get();

  @Test
  void closingTheApplicationStopsTheConsumerGracefullyWithNothingAbandoned() {
    String topic = KafkaService.uniqueName("spring_payments_stop");
    String group = topic + "_group";
    KAFKA.createTopic(topic, 3);
    KAFKA.createTopic(topic + ".DLT", 1);
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      records.add(KafkaService.record(topic, null, Integer.toString(1 + i % 20), topic + "-" + i,
          "{\"accountId\":" + (1 + i % 20) + ",\"amountCents\":1}"));
    }
    KAFKA.sendAll(records);

    String[] args = {"--spring.r2dbc.url=" + PG.url(), "--spring.kafka.bootstrap-servers=" + KAFKA.bootstrapServers(),
        "--idem.consumers.payments.source.topics=" + topic, "--idem.consumers.payments.source.group-id=" + group,
        "--idem.consumers.payments.source.dead-letter-topic=" + topic + ".DLT"};
    ConfigurableApplicationContext context = new SpringApplicationBuilder(PaymentsApplication.class).run(args);
    ManagedConsumer payments;
    try {
      payments = context.getBean(IdemConsumers.class).consumer("payments").orElseThrow();
      await().atMost(KafkaService.timeout())
          .until(() -> PG.count("SELECT count(*) FROM payments WHERE event_id LIKE $1", topic + "-%") >= 100);
    } finally {
      context.close();
    }

    assertThat(payments.state()).isEqualTo(ManagedConsumer.State.STOPPED);
    ShutdownReport report = payments.lastShutdownReport().orElseThrow();
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    long appliedBeforeStop = PG.count("SELECT count(*) FROM payments WHERE event_id LIKE $1", topic + "-%");
    long committedBeforeStop = KAFKA.committedOffsets(group, topic).values().stream().mapToLong(Long::longValue).sum();
    assertThat(committedBeforeStop).isPositive().isLessThanOrEqualTo(appliedBeforeStop);

    // Nothing lost, nothing twice: a new instance of the application finishes the topic.
    ConfigurableApplicationContext again = new SpringApplicationBuilder(PaymentsApplication.class).run(args);
    try {
      await().atMost(KafkaService.timeout()).untilAsserted(() -> {
        assertThat(PG.count("SELECT count(*) FROM payments WHERE event_id LIKE $1", topic + "-%")).isEqualTo(300);
        assertThat(KAFKA.committedOffsets(group, topic)).isEqualTo(KAFKA.endOffsets(topic));
      });
    } finally {
      again.close();
    }
    assertThat(PG.count("SELECT count(DISTINCT event_id) FROM payments WHERE event_id LIKE $1", topic + "-%")).isEqualTo(300);
  }
}
