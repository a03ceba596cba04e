package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.ShutdownReport;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.spring.testapp.OrderHandler;
import dev.idem.spring.testapp.TestApplication;
import dev.idem.testing.PostgresService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A consumer declared only in configuration ({@code idem.consumers.<name>.source.type=rabbitmq}) in
 * a Spring Boot application, on the real RabbitMQ and PostgreSQL: every order applied once
 * despite repeats, every delivery acknowledged, health UP, and a graceful stop with the context.
 */
class RabbitConfiguredConsumerIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final RabbitService RABBIT = RabbitService.get();

  @Test
  void aConfiguredRabbitConsumerAppliesEachOrderOnceAcknowledgesEverythingAndStopsGracefully() throws Exception {
    String name = PostgresService.uniqueName("orders");
    String queue = name + ".q";
    RabbitTopology.declare(RABBIT.admin(), queue, RabbitTopology.QueueType.CLASSIC);
    PG.execute("CREATE TABLE IF NOT EXISTS " + OrderHandler.TABLE + " (message_id text NOT NULL, body text NOT NULL)");
    List<RabbitService.Message> messages = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      messages.add(RabbitService.message(name + "-" + i, "order " + i));
    }
    for (int i = 0; i < 60; i += 5) {
      messages.add(RabbitService.message(name + "-" + i, "order " + i + " again"));
    }
    RABBIT.publish(queue, messages);

    String at = "--idem.consumers." + name + ".";
    ConfigurableApplicationContext context = new SpringApplicationBuilder(TestApplication.class).run(
        "--spring.r2dbc.url=" + PG.url(), "--spring.r2dbc.pool.initial-size=1", "--spring.r2dbc.pool.max-size=8",
        at + "handler=orderHandler", at + "concurrency=4", at + "prefetch=16",
        at + "source.type=rabbitmq", at + "source.uri=" + RABBIT.uri(), at + "source.queue=" + queue);
    ManagedConsumer consumer;
    try {
      consumer = context.getBean(IdemConsumers.class).consumer(name).orElseThrow();
      await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
        assertThat(PG.count("SELECT count(*) FROM " + OrderHandler.TABLE + " WHERE message_id LIKE $1", name + "-%"))
            .isEqualTo(60);
        assertThat(consumer.unsettled()).isZero();
        assertThat(RABBIT.messageCount(queue)).isZero();
      });
      assertThat(
          PG.count("SELECT count(DISTINCT message_id) FROM " + OrderHandler.TABLE + " WHERE message_id LIKE $1", name + "-%"))
          .isEqualTo(60);
      HealthIndicator health = (HealthIndicator) context.getBean("idemHealthContributor", CompositeHealthContributor.class)
          .getContributor(name);
      assertThat(health.health().getStatus()).isEqualTo(Status.UP);
    } finally {
      context.close();
    }

    assertThat(consumer.state()).isEqualTo(ManagedConsumer.State.STOPPED);
    ShutdownReport report = consumer.lastShutdownReport().orElseThrow();
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(RABBIT.consumerCount(queue)).isZero();
    // Nothing came back to the queue: every delivery was acknowledged.
    assertThat(RABBIT.messageCount(queue)).isZero();
    assertThat(RABBIT.messageCount(RabbitTopology.deadLetterQueue(queue))).isZero();
    RabbitTopology.delete(RABBIT.admin(), queue);
  }
}
