package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Handler;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code idem.consumers.<name>.source.engine}: passed to the Kafka source, and an engine the class
 * path cannot run fails the application's start (not a later poll) with the adapter's message.
 * This module's tests run on kafka-clients 3.9.1 without reactor-kafka; the refusal on
 * kafka-clients 4.x is the Spring Boot example's {@code ReactorKafkaEngineIntegrationTests}.
 * Nothing here connects to a broker or a database.
 */
class KafkaEngineTests {

  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(IdemAutoConfiguration.class))
      .withUserConfiguration(Beans.class)
      .withPropertyValues("idem.inbox.create-schema=false", "idem.consumers.orders.handler=printer",
          "idem.consumers.orders.source.type=kafka", "idem.consumers.orders.source.bootstrap-servers=127.0.0.1:1",
          "idem.consumers.orders.source.topics=orders");

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

  private static String sourceDescription(ManagedConsumer consumer) {
    try (ConsumerSource<?> source = consumer.definition().createSource()) {
      return source.toString();
    }
  }

  @Test
  void theDefaultEngineIsNative() {
    runner.withPropertyValues("idem.auto-startup=false").run(context -> {
      assertThat(context).hasNotFailed();
      ManagedConsumer orders = context.getBean(IdemConsumers.class).consumer("orders").orElseThrow();
      assertThat(sourceDescription(orders)).contains("engine=NATIVE");
    });
  }

  @Test
  void theEnginePropertyIsPassedToTheSource() {
    runner.withPropertyValues("idem.auto-startup=false", "idem.consumers.orders.source.engine=native").run(context -> {
      assertThat(context).hasNotFailed();
      ManagedConsumer orders = context.getBean(IdemConsumers.class).consumer("orders").orElseThrow();
      assertThat(sourceDescription(orders)).contains("engine=NATIVE");
    });
  }

  @Test
  void reactorKafkaWithoutReactorKafkaOnTheClassPathFailsTheStartWithTheAdaptersMessage() {
    runner.withPropertyValues("idem.consumers.orders.source.engine=reactor-kafka").run(context -> assertThat(context).getFailure()
        .hasStackTraceContaining("Idem consumer 'orders' could not start")
        .hasStackTraceContaining("engine REACTOR_KAFKA needs io.projectreactor.kafka:reactor-kafka"));
  }

  @Test
  void anUnknownEngineNamesTheProperty() {
    runner.withPropertyValues("idem.auto-startup=false", "idem.consumers.orders.source.engine=reactor")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.source.engine"));
  }

  @Test
  void theEngineOnARabbitSourceIsRefused() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(IdemAutoConfiguration.class))
        .withUserConfiguration(Beans.class)
        .withPropertyValues("idem.auto-startup=false", "idem.consumers.orders.handler=printer",
            "idem.consumers.orders.source.type=rabbitmq", "idem.consumers.orders.source.queue=orders",
            "idem.consumers.orders.source.engine=native")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.source.engine applies to source.type kafka only"));
  }

  @Test
  void aConsumerThatCannotStartStopsThoseStartedBeforeIt() {
    AtomicBoolean firstClosed = new AtomicBoolean();
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(IdemAutoConfiguration.class))
        .withUserConfiguration(Beans.class)
        .withPropertyValues("idem.inbox.create-schema=false")
        .withBean("first", IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named("first")
            .source(() -> ConsumerSource.of(Flux::never, () -> firstClosed.set(true)))
            .handler((payload, tx) -> Mono.empty())
            .build())
        .withBean("second", IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named("second")
            .source(() -> {
              throw new IllegalStateException("refused by the adapter");
            })
            .handler((payload, tx) -> Mono.empty())
            .build())
        .run(context -> {
          assertThat(context).getFailure()
              .hasStackTraceContaining("Idem consumer 'second' could not start: refused by the adapter");
          assertThat(firstClosed).isTrue();
        });
  }
}
