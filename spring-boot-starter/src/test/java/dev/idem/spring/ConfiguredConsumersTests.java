package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.publisher.Mono;

/** What the auto-configuration makes of {@code idem.consumers.*}, without starting anything. */
class ConfiguredConsumersTests {

  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(IdemAutoConfiguration.class))
      .withUserConfiguration(Beans.class)
      .withPropertyValues("idem.auto-startup=false");

  @Configuration(proxyBeanMethods = false)
  static class Beans {
    @Bean
    ConnectionFactory connectionFactory() {
      // Never connected to: these tests only build.
      return ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");
    }

    @Bean
    Handler<String> printer() {
      return (payload, tx) -> Mono.empty();
    }

    @Bean
    String notAHandler() {
      return "text";
    }
  }

  @Test
  void aConfiguredRabbitConsumerAndABeanConsumerAreBuiltWithOneHealthIndicatorEach() {
    runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders", "idem.consumers.orders.concurrency=4",
        "idem.consumers.off.enabled=false", "idem.consumers.off.handler=missing")
        .withBean("audit", IdemConsumerDefinition.class, () -> IdemConsumerDefinition.<String>named("audit")
            .source(() -> ConsumerSource.of(reactor.core.publisher.Flux::never, () -> {}))
            .handler((payload, tx) -> Mono.empty())
            .build())
        .run(context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).hasSingleBean(PostgresInbox.class);
          IdemConsumers consumers = context.getBean(IdemConsumers.class);
          assertThat(consumers.consumers()).extracting(ManagedConsumer::name).containsExactly("orders", "audit");
          assertThat(consumers.consumers()).allMatch(c -> c.state() == ManagedConsumer.State.NOT_STARTED);
          assertThat(context
              .getBean("idemHealthContributor", org.springframework.boot.health.contributor.CompositeHealthContributor.class)
              .getContributor("orders")).isInstanceOf(IdemHealthIndicator.class);
        });
  }

  @Test
  void anInboxTableNameTooLongForItsDerivedNamesNamesThePropertyAndTheLimit() {
    String tooLong = "t".repeat(PostgresInbox.MAX_TABLE_NAME_LENGTH + 1);
    runner.withPropertyValues("idem.inbox.table=" + tooLong)
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.inbox.table (" + tooLong + ")")
            .hasStackTraceContaining("63"));
  }

  @Test
  void batchSettingsReachTheConsumerAndAnInvalidOneNamesItsProperty() {
    runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders", "idem.consumers.orders.slow-message-threshold=0s")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("Invalid Idem consumer configuration for consumer 'orders' (idem.consumers.orders.*")
            .hasStackTraceContaining("slowMessageThreshold must be positive"));
    runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders", "idem.consumers.orders.max-batch-size=0")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("Invalid Idem consumer configuration for consumer 'orders' (idem.consumers.orders.*")
            .hasStackTraceContaining("maxBatchSize must be at least 1"));
  }

  @Test
  void anUnsetMaxBatchSizeLeavesTheCoresDefaultAndItsSystemPropertyInForce() {
    String before = System.getProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
    System.setProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY, "3");
    try {
      runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
          "idem.consumers.orders.source.queue=orders", "idem.consumers.sized.handler=printer",
          "idem.consumers.sized.source.type=rabbitmq", "idem.consumers.sized.source.queue=sized",
          "idem.consumers.sized.max-batch-size=7")
          .run(context -> {
            assertThat(context).hasNotFailed();
            PostgresInbox inbox = context.getBean(PostgresInbox.class);
            IdemConsumers consumers = context.getBean(IdemConsumers.class);
            assertThat(consumers.consumers()).extracting(c -> built(c.definition(), inbox))
                .containsExactly("maxBatchSize=3", "maxBatchSize=7");
          });
    } finally {
      if (before == null) {
        System.clearProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
      } else {
        System.setProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY, before);
      }
    }
  }

  /** The batch size of the consumer a definition builds, as its toString() shows it. */
  @SuppressWarnings("unchecked")
  private static String built(IdemConsumerDefinition<?> definition, PostgresInbox inbox) {
    IdempotentConsumer<Object> consumer = ((IdemConsumerDefinition<Object>) definition)
        .applyTo(IdempotentConsumer.<Object>named(definition.name()).inbox(inbox)).build();
    return consumer.toString().replaceAll(".*(maxBatchSize=\\d+).*", "$1");
  }

  @Test
  void aMissingHandlerNamesTheProperty() {
    runner.withPropertyValues("idem.consumers.orders.source.type=rabbitmq", "idem.consumers.orders.source.queue=orders")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.handler is required"));
  }

  @Test
  void aHandlerBeanOfTheWrongTypeIsNamed() {
    runner.withPropertyValues("idem.consumers.orders.handler=notAHandler", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.handler names bean 'notAHandler' of type java.lang.String"));
  }

  @Test
  void aKafkaSettingOnARabbitSourceIsNamed() {
    runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders", "idem.consumers.orders.source.topics=payments")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.source.topics applies to source.type kafka only"));
  }

  @Test
  void aKafkaConsumerWithoutTopicsIsNamedAndBootstrapServersComeFromSpringKafka() {
    runner.withPropertyValues("idem.consumers.payments.handler=printer", "idem.consumers.payments.source.type=kafka",
        "spring.kafka.bootstrap-servers=127.0.0.1:9092")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.payments.source.topics is required"));
    runner.withPropertyValues("idem.consumers.payments.handler=printer", "idem.consumers.payments.source.type=kafka",
        "idem.consumers.payments.source.topics=payments", "spring.kafka.bootstrap-servers=127.0.0.1:9092")
        .run(context -> assertThat(context).hasNotFailed());
  }

  @Test
  void anUnknownPayloadClassIsNamed() {
    runner.withPropertyValues("idem.consumers.orders.handler=printer", "idem.consumers.orders.source.type=rabbitmq",
        "idem.consumers.orders.source.queue=orders", "idem.consumers.orders.payload-type=com.example.Missing")
        .run(context -> assertThat(context).getFailure()
            .hasStackTraceContaining("idem.consumers.orders.payload-type"));
  }
}
