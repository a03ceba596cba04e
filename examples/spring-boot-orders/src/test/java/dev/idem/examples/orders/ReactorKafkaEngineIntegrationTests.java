package dev.idem.examples.orders;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.kafka.testing.KafkaService;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import java.net.URI;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;

/**
 * {@code idem.consumers.<name>.source.engine: reactor-kafka} in a Spring Boot 4 application fails
 * the application's start, with the Kafka adapter's message, when {@code SpringApplication.run}
 * starts the consumers; not later, record by record. On this class path (Boot's kafka-clients
 * 4.1.x, no reactor-kafka) the adapter names the missing reactor-kafka; with reactor-kafka added it
 * names kafka-clients 4.x, on which Reactor Kafka cannot run.
 */
class ReactorKafkaEngineIntegrationTests {

  @Test
  void theReactorKafkaEngineFailsTheApplicationsStartWithTheAdaptersMessage() {
    PostgresService pg = PostgresService.get();
    KafkaService kafka = KafkaService.get();
    RabbitService rabbitService = RabbitService.get();
    URI rabbit = URI.create(rabbitService.uri());
    String[] credentials = rabbit.getUserInfo() != null ? rabbit.getUserInfo().split(":", 2) : new String[]{"guest", "guest"};
    String run = KafkaService.uniqueName("orders_reactor_kafka");
    String[] args = {"--spring.r2dbc.url=" + pg.url(), "--spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
        "--spring.rabbitmq.host=" + rabbitService.host(), "--spring.rabbitmq.port=" + rabbitService.port(),
        "--spring.rabbitmq.username=" + credentials[0], "--spring.rabbitmq.password=" + credentials[1],
        "--orders.kafka.topic=" + run, "--orders.rabbit.queue=" + run + "_store",
        "--idem.consumers.web-orders.source.engine=reactor-kafka", "--server.port=0"};
    assertThatThrownBy(() -> new SpringApplicationBuilder(OrdersApplication.class).run(args).close())
        .hasStackTraceContaining("Idem consumer 'web-orders' could not start")
        .hasStackTraceContaining("engine REACTOR_KAFKA needs io.projectreactor.kafka:reactor-kafka");
  }
}
