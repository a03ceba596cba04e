package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.ShutdownReport;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.ShareGroups;
import dev.idem.micrometer.MicrometerConsumerMetrics;
import dev.idem.spring.testapp.OrderHandler;
import dev.idem.spring.testapp.TestApplication;
import dev.idem.testing.PostgresService;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A consumer of a Kafka share group declared only in configuration
 * ({@code idem.consumers.<name>.source.type=kafka-share}) in a Spring Boot application, on the real
 * broker and PostgreSQL: every order applied once despite producer repeats, health UP, the share
 * consumers' meters and the consumer's meters in the application's registry, and a graceful stop
 * with the context.
 */
class KafkaShareConfiguredConsumerIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final KafkaService KAFKA = KafkaService.get();

  /** The application's meter registry, as Spring Boot's metrics auto-configuration would provide one. */
  @Configuration(proxyBeanMethods = false)
  static class Meters {
    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  @Test
  void aConfiguredShareGroupConsumerAppliesEachOrderOnceReportsHealthAndMetersAndStopsGracefully() throws Exception {
    String name = KafkaService.uniqueName("shareorders");
    String topic = name + "_topic";
    String group = name + "_queue";
    KAFKA.createTopic(topic, 2);
    ShareGroups.configure(KAFKA, group, Map.of("share.auto.offset.reset", "earliest"));
    PG.execute("CREATE TABLE IF NOT EXISTS " + OrderHandler.TABLE + " (message_id text NOT NULL, body text NOT NULL)");
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      records.add(KafkaService.record(topic, i % 2, "k" + i, name + "-" + i, "order " + i));
    }
    for (int i = 0; i < 60; i += 5) {
      records.add(KafkaService.record(topic, (i + 1) % 2, "k" + i, name + "-" + i, "order " + i + " again"));
    }
    KAFKA.sendAll(records);

    String at = "--idem.consumers." + name + ".";
    ConfigurableApplicationContext context = new SpringApplicationBuilder(TestApplication.class, Meters.class).run(
        "--spring.r2dbc.url=" + PG.url(), "--spring.r2dbc.pool.initial-size=1", "--spring.r2dbc.pool.max-size=8",
        at + "handler=orderHandler", at + "concurrency=4", at + "ordering=unordered",
        at + "source.type=kafka-share", at + "source.bootstrap-servers=" + KAFKA.bootstrapServers(),
        at + "source.topics=" + topic,
        at + "source.group-id=" + group, at + "source.share-consumers=2");
    ManagedConsumer consumer;
    MeterRegistry meters = context.getBean(MeterRegistry.class);
    try {
      consumer = context.getBean(IdemConsumers.class).consumer(name).orElseThrow();
      await().atMost(Duration.ofSeconds(90)).untilAsserted(() -> {
        assertThat(PG.count("SELECT count(*) FROM " + OrderHandler.TABLE + " WHERE message_id LIKE $1", name + "-%"))
            .isEqualTo(60);
        assertThat(consumer.unsettled()).isZero();
        assertThat(meters.find(MicrometerConsumerMetrics.MESSAGES).counters().stream().mapToDouble(c -> c.count()).sum())
            .as("settled messages counted, the 12 producer repeats among them").isGreaterThanOrEqualTo(72);
      });
      assertThat(
          PG.count("SELECT count(DISTINCT message_id) FROM " + OrderHandler.TABLE + " WHERE message_id LIKE $1", name + "-%"))
          .isEqualTo(60);
      HealthIndicator health = (HealthIndicator) context.getBean("idemHealthContributor", CompositeHealthContributor.class)
          .getContributor(name);
      assertThat(health.health().getStatus()).isEqualTo(Status.UP);
      assertThat(meters.find(KafkaShareSource.HELD_RECORDS_METRIC).tag("idem.source", group).gauges()).hasSize(2);
      assertThat(
          meters.find("kafka.consumer.share.fetch.manager.records.consumed.total").tag("idem.source", group).functionCounters())
          .hasSize(2).extracting(FunctionCounter::count)
          .satisfies(counts -> assertThat(counts.stream().mapToDouble(Double::doubleValue).sum()).isGreaterThanOrEqualTo(72));
    } finally {
      context.close();
    }

    assertThat(consumer.state()).isEqualTo(ManagedConsumer.State.STOPPED);
    ShutdownReport report = consumer.lastShutdownReport().orElseThrow();
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(meters.find(KafkaShareSource.HELD_RECORDS_METRIC).tag("idem.source", group).gauges())
        .as("the share consumers' meters leave with them").isEmpty();
  }
}
