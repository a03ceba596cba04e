package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Each consumer's health indicator on the real PostgreSQL: UP while it keeps up, DOWN when its
 * oldest unsettled message is too old or its source failed, OUT_OF_SERVICE once stopped.
 */
class IdemHealthIntegrationTests {

  private static final PostgresService PG = PostgresService.get();

  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(R2dbcAutoConfiguration.class, IdemAutoConfiguration.class))
      .withPropertyValues("spring.r2dbc.url=" + PG.url(), "spring.r2dbc.pool.initial-size=1", "spring.r2dbc.pool.max-size=4");

  private static Health health(org.springframework.context.ApplicationContext context, String consumer) {
    return ((HealthIndicator) context.getBean("idemHealthContributor", CompositeHealthContributor.class).getContributor(consumer))
        .health();
  }

  @Test
  void aStuckMessageTurnsHealthDownAFailedSourceTooAndAHealthyConsumerStaysUp() {
    String stuck = PostgresService.uniqueName("stuck");
    String broken = PostgresService.uniqueName("broken");
    String healthy = PostgresService.uniqueName("healthy");
    runner
        .withBean(stuck, IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named(stuck)
            .source(
                () -> ConsumerSource.of(() -> Flux.just(TestDelivery.of(stuck + "-1", "x")).concatWith(Flux.never()), () -> {}))
            .handler((payload, tx) -> Mono.never())
            .health(Duration.ofMillis(300), 10)
            .shutdownGracePeriod(Duration.ofMillis(200))
            .build())
        .withBean(broken, IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named(broken)
            .source(() -> ConsumerSource
                .of(() -> Flux.<dev.idem.Delivery<String>>error(new IllegalStateException("broker gone for good")), () -> {}))
            .handler((payload, tx) -> Mono.empty())
            .build())
        .withBean(healthy, IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named(healthy)
            .source(
                () -> ConsumerSource.of(() -> Flux.just(TestDelivery.of(healthy + "-1", "x")).concatWith(Flux.never()), () -> {}))
            .handler((payload, tx) -> tx.sql("SELECT 1").execute())
            .build())
        .run(context -> {
          assertThat(context).hasNotFailed();
          ManagedConsumer stuckConsumer = context.getBean(IdemConsumers.class).consumer(stuck).orElseThrow();
          await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            assertThat(health(context, stuck).getStatus()).isEqualTo(Status.DOWN);
            assertThat(health(context, broken).getStatus()).isEqualTo(Status.DOWN);
            assertThat(context.getBean(IdemConsumers.class).consumer(healthy).orElseThrow().unsettled()).isZero();
          });
          assertThat(health(context, stuck).getDetails().get("reason").toString()).contains("oldest unsettled message");
          assertThat(health(context, broken).getDetails().get("error").toString()).contains("broker gone for good");
          assertThat(health(context, healthy).getStatus()).isEqualTo(Status.UP);
          assertThat(PG.count("SELECT count(*) FROM processed_messages WHERE consumer = $1", healthy)).isEqualTo(1);

          HealthIndicator stuckHealth = (HealthIndicator) context
              .getBean("idemHealthContributor", CompositeHealthContributor.class)
              .getContributor(stuck);
          context.close();

          assertThat(stuckHealth.health().getStatus()).isEqualTo(Status.OUT_OF_SERVICE);
          // The stuck message was in flight past the grace period: rolled back, left for redelivery.
          assertThat(stuckConsumer.lastShutdownReport().orElseThrow().abandonedInFlight()).isEqualTo(1);
          assertThat(PG.count("SELECT count(*) FROM processed_messages WHERE consumer = $1", stuck)).isZero();
        });
  }
}
