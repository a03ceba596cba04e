package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Handler;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.publisher.Mono;

/**
 * {@code idem.consumers.<name>.source.type: kafka-share}: a share group from
 * {@code application.yml}, with its share consumers, and the settings that cannot hold refused at
 * start with the property named. The share group itself is exercised against a real broker by
 * idem-kafka's {@code KafkaShareSourceIntegrationTests}, and a configured application by
 * {@code KafkaShareConfiguredConsumerIntegrationTests}; nothing here connects to a broker or a
 * database.
 */
class KafkaShareSourceConfigurationTests {

  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(IdemAutoConfiguration.class))
      .withUserConfiguration(Beans.class)
      .withPropertyValues("idem.auto-startup=false", "idem.inbox.create-schema=false", "idem.consumers.orders.handler=printer",
          "idem.consumers.orders.source.bootstrap-servers=127.0.0.1:1", "idem.consumers.orders.source.topics=orders");

  @Configuration(proxyBeanMethods = false)
  static class Beans {
    @Bean
    ConnectionFactory connectionFactory() {
      // Never connected to.
      return ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");
    }

    @Bean
    Handler<String> printer() {
      return (payload, tx) -> Mono.empty();
    }
  }

  @Test
  void aShareGroupConsumerGetsAShareSourceWithItsShareConsumers() {
    runner.withPropertyValues("idem.consumers.orders.source.type=kafka-share", "idem.consumers.orders.ordering=unordered",
        "idem.consumers.orders.source.group-id=orders-queue", "idem.consumers.orders.source.share-consumers=3").run(context -> {
          assertThat(context).hasNotFailed();
          ManagedConsumer orders = context.getBean(IdemConsumers.class).consumer("orders").orElseThrow();
          try (ConsumerSource<?> source = orders.definition().createSource()) {
            assertThat(source.toString()).contains("KafkaShareSource[consumers=3").contains("orders-queue");
          }
        });
  }

  @Test
  void aShareGroupConsumerThatKeepsTheDefaultKeyOrderIsRefusedNamingTheProperty() {
    runner.withPropertyValues("idem.consumers.orders.source.type=kafka-share")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.ordering is BY_KEY, but a kafka-share source keeps no order")
            .hasStackTraceContaining("set idem.consumers.orders.ordering to unordered"));
  }

  @Test
  void shareConsumersOnAConsumerGroupSourceAndTooFewShareConsumersAreRefused() {
    runner.withPropertyValues("idem.consumers.orders.source.type=kafka", "idem.consumers.orders.source.share-consumers=2")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.source.share-consumers applies to source.type kafka-share only"));
    runner.withPropertyValues("idem.consumers.orders.source.type=kafka-share", "idem.consumers.orders.ordering=unordered",
        "idem.consumers.orders.source.share-consumers=0")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.source.share-consumers must be at least 1, was 0"));
  }
}
