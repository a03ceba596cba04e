package dev.idem.examples.orders;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.ShutdownReport;
import dev.idem.kafka.DeadLetterHeaders;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.rabbit.RabbitHeaders;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.spring.IdemConsumers;
import dev.idem.spring.ManagedConsumer;
import dev.idem.testing.PostgresService;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.actuate.endpoint.HealthEndpoint;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The example application as it ships (its {@code application.yml}, Spring Boot 4.0.7's own
 * dependency versions, no version property), started as {@code main} starts it, against the real
 * PostgreSQL, RabbitMQ and a real Kafka broker (the Idem build's in-JVM KRaft broker unless one
 * listens on 127.0.0.1:9092). The application's own {@code KafkaTemplate} and
 * {@code RabbitTemplate} produce orders on both channels, every tenth one twice, plus orders that
 * can never apply (an unknown customer, a body that is not JSON):
 * <ul>
 *   <li>every order is applied once: one row each, the customers' totals add up exactly;</li>
 *   <li>the repeats are suppressed and counted as duplicates;</li>
 *   <li>the bad ones are dead-lettered with their reason: on the dead-letter topic
 *       ({@code <topic>.DLT}) and in the dead-letter queue ({@code <queue>.dlq});</li>
 *   <li>health is UP, Idem's consumers and the application's as a whole, also over HTTP at the paths
 *       the docs give, and the dead letters show in the {@code idem.messages} meter there;</li>
 *   <li>closing the application while orders are in flight stops both consumers gracefully
 *       (nothing abandoned), and a new instance applies the rest: nothing lost, nothing twice.</li>
 * </ul>
 */
class OrdersApplicationIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final KafkaService KAFKA = KafkaService.get();
  private static final RabbitService RABBIT = RabbitService.get();
  private static final int ORDERS_PER_CHANNEL = 300;
  private static final long UNKNOWN_CUSTOMER = 999;

  private final String run = KafkaService.uniqueName("orders");
  private final String topic = run;
  private final String queue = run + "_store";
  private final Map<Long, long[]> expected = new HashMap<>();

  private String[] args() {
    URI rabbit = URI.create(RABBIT.uri());
    String[] credentials = rabbit.getUserInfo() != null ? rabbit.getUserInfo().split(":", 2) : new String[]{"guest", "guest"};
    return new String[]{"--spring.r2dbc.url=" + PG.url(), "--spring.kafka.bootstrap-servers=" + KAFKA.bootstrapServers(),
        "--spring.rabbitmq.host=" + RABBIT.host(), "--spring.rabbitmq.port=" + RABBIT.port(),
        "--spring.rabbitmq.username=" + credentials[0], "--spring.rabbitmq.password=" + credentials[1],
        "--orders.kafka.topic=" + topic, "--orders.rabbit.queue=" + queue,
        "--idem.consumers.web-orders.source.group-id=" + run + "_group", "--server.port=0"};
  }

  private List<CompletableFuture<Void>> publish(OrderPublisher publisher, Random random, String batch, int count) {
    List<CompletableFuture<Void>> sends = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Order web = order(random, run + "-web-" + batch + i);
      Order store = order(random, run + "-store-" + batch + i);
      sends.add(publisher.toKafka(web));
      sends.add(publisher.toRabbit(store));
      if (i % 10 == 0) {
        sends.add(publisher.toKafka(web));
        sends.add(publisher.toRabbit(store));
      }
    }
    return sends;
  }

  private Order order(Random random, String id) {
    long customer = 1 + random.nextInt(50);
    long amount = 1 + random.nextInt(10_000);
    long[] totals = expected.computeIfAbsent(customer, c -> new long[2]);
    totals[0]++;
    totals[1] += amount;
    return new Order(id, customer, amount);
  }

  private static void confirmed(List<CompletableFuture<Void>> sends) throws Exception {
    CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(KafkaService.timeout().toSeconds(), TimeUnit.SECONDS);
  }

  private long applied() {
    return PG.count("SELECT count(*) FROM shop_orders WHERE order_id LIKE $1", run + "-%");
  }

  private Map<Long, long[]> customerTotals() {
    Map<Long, long[]> totals = new HashMap<>();
    for (long customer = 1; customer <= 50; customer++) {
      totals.put(customer, new long[]{PG.count("SELECT orders FROM customers WHERE id = $1", customer),
          PG.count("SELECT total_cents FROM customers WHERE id = $1", customer)});
    }
    return totals;
  }

  private static double count(MeterRegistry meters, String consumer, String outcome) {
    return meters.get("idem.messages").tag("consumer", consumer).tag("outcome", outcome).counter().count();
  }

  /** GETs a path of the application over HTTP; fails unless the answer is 200. */
  private static String get(int port, String path) throws Exception {
    HttpResponse<String> response = HttpClient.newHttpClient().send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(30)).build(),
        HttpResponse.BodyHandlers.ofString());
    assertThat(response.statusCode()).as("GET %s: %s", path, response.body()).isEqualTo(200);
    return response.body();
  }

  private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
    Header header = record.headers().lastHeader(name);
    return header == null ? null : new String(header.value(), StandardCharsets.UTF_8);
  }

  @Test
  void ordersFromBothChannelsApplyOnceRepeatsAreSuppressedBadOnesDeadLetteredHealthIsUpAndTheStopIsGraceful() throws Exception {
    Random random = new Random(42);
    ConfigurableApplicationContext context = new SpringApplicationBuilder(OrdersApplication.class).run(args());
    Map<Long, long[]> before = customerTotals();
    ManagedConsumer web;
    ManagedConsumer store;
    try {
      IdemConsumers consumers = context.getBean(IdemConsumers.class);
      web = consumers.consumer("web-orders").orElseThrow();
      store = consumers.consumer("store-orders").orElseThrow();
      OrderPublisher publisher = context.getBean(OrderPublisher.class);
      List<CompletableFuture<Void>> sends = publish(publisher, random, "", ORDERS_PER_CHANNEL);
      // Never applicable: an unknown customer (the handler's NonRetryableException) and a body that is not JSON.
      sends.add(publisher.toKafka(new Order(run + "-web-unknown", UNKNOWN_CUSTOMER, 100)));
      sends.add(publisher.toRabbit(new Order(run + "-store-unknown", UNKNOWN_CUSTOMER, 100)));
      sends.add(publisher.toKafka(run + "-web-garbage", "1", "not json"));
      sends.add(publisher.toRabbit(run + "-store-garbage", "not json"));
      confirmed(sends);

      MeterRegistry meters = context.getBean(MeterRegistry.class);
      await().atMost(KafkaService.timeout()).untilAsserted(() -> {
        assertThat(applied()).isEqualTo(2L * ORDERS_PER_CHANNEL);
        assertThat(KAFKA.committedOffsets(run + "_group", topic)).isEqualTo(KAFKA.endOffsets(topic));
        assertThat(RABBIT.messageCount(queue)).isZero();
        assertThat(RABBIT.messageCount(queue + ".dlq")).isEqualTo(2);
        for (String consumer : List.of("web-orders", "store-orders")) {
          assertThat(count(meters, consumer, "processed")).isEqualTo(ORDERS_PER_CHANNEL);
          assertThat(count(meters, consumer, "duplicate")).isEqualTo(ORDERS_PER_CHANNEL / 10);
          assertThat(count(meters, consumer, "dead_lettered")).isEqualTo(2);
        }
      });

      // Every order once: one row each, and each customer's totals moved by exactly its orders.
      assertThat(PG.count("SELECT count(DISTINCT order_id) FROM shop_orders WHERE order_id LIKE $1", run + "-%"))
          .isEqualTo(2L * ORDERS_PER_CHANNEL);
      Map<Long, long[]> after = customerTotals();
      for (long customer = 1; customer <= 50; customer++) {
        long[] want = expected.getOrDefault(customer, new long[2]);
        assertThat(after.get(customer)[0] - before.get(customer)[0]).as("orders of customer %d", customer).isEqualTo(want[0]);
        assertThat(after.get(customer)[1] - before.get(customer)[1]).as("total of customer %d", customer).isEqualTo(want[1]);
      }

      // Dead letters, with their reasons: the dead-letter topic and the dead-letter queue.
      Map<String, String> kafkaDeadLetters = new HashMap<>();
      for (ConsumerRecord<byte[], byte[]> record : KAFKA.readAll(topic + ".DLT")) {
        kafkaDeadLetters.put(header(record, DeadLetterHeaders.MESSAGE_ID), header(record, DeadLetterHeaders.REASON));
      }
      assertThat(kafkaDeadLetters).containsExactlyInAnyOrderEntriesOf(Map.of(
          run + "-web-unknown", "NON_RETRYABLE_ERROR", run + "-web-garbage", "UNDECODABLE_PAYLOAD"));
      RabbitTemplate rabbit = context.getBean(RabbitTemplate.class);
      Map<String, String> rabbitDeadLetters = new HashMap<>();
      Message deadLetter;
      while ((deadLetter = rabbit.receive(queue + ".dlq", 1_000)) != null) {
        rabbitDeadLetters.put(deadLetter.getMessageProperties().getMessageId(),
            String.valueOf(deadLetter.getMessageProperties().<Object>getHeader(RabbitHeaders.REASON)));
      }
      assertThat(rabbitDeadLetters).containsExactlyInAnyOrderEntriesOf(Map.of(
          run + "-store-unknown", "NON_RETRYABLE_ERROR", run + "-store-garbage", "UNDECODABLE_PAYLOAD"));

      // Health: each Idem consumer's, and the application's (R2DBC, RabbitMQ, Idem) as a whole.
      CompositeHealthContributor idem = context.getBean("idemHealthContributor", CompositeHealthContributor.class);
      assertThat(((HealthIndicator) idem.getContributor("web-orders")).health().getStatus()).isEqualTo(Status.UP);
      assertThat(((HealthIndicator) idem.getContributor("store-orders")).health().getStatus()).isEqualTo(Status.UP);
      assertThat(context.getBean(HealthEndpoint.class).health().getStatus()).isEqualTo(Status.UP);
      // The same over HTTP, at the paths docs/spring-boot.md gives (the example serves the actuator with WebFlux).
      int port = Integer.parseInt(context.getEnvironment().getProperty("local.server.port", "-1"));
      assertThat(port).as("the port WebFlux listens on").isPositive();
      assertThat(get(port, "/actuator/health/idem/web-orders")).isEqualTo("{\"status\":\"UP\"}");
      assertThat(get(port, "/actuator/health/idem/store-orders")).isEqualTo("{\"status\":\"UP\"}");
      assertThat(get(port, "/actuator/health")).contains("\"idem\":{\"components\":{");
      assertThat(get(port, "/actuator/metrics/idem.messages?tag=consumer:web-orders&tag=outcome:dead_lettered"))
          .contains("\"statistic\":\"COUNT\",\"value\":2.0");
      assertThat(web.state()).isEqualTo(ManagedConsumer.State.RUNNING);
      assertThat(store.state()).isEqualTo(ManagedConsumer.State.RUNNING);

      // A second batch, and the application closed while it is being applied.
      confirmed(publish(publisher, random, "b", 200));
      await().atMost(KafkaService.timeout()).until(() -> applied() >= 2L * ORDERS_PER_CHANNEL + 50);
    } finally {
      context.close();
    }

    for (ManagedConsumer consumer : List.of(web, store)) {
      assertThat(consumer.state()).as(consumer.name()).isEqualTo(ManagedConsumer.State.STOPPED);
      ShutdownReport report = consumer.lastShutdownReport().orElseThrow();
      assertThat(report.abandonedInFlight()).as(consumer.name()).isZero();
      assertThat(report.withinGracePeriod()).as(consumer.name()).isTrue();
    }
    assertThat(RABBIT.consumerCount(queue)).isZero();

    // Nothing lost, nothing twice: a new instance of the application applies the rest.
    ConfigurableApplicationContext again = new SpringApplicationBuilder(OrdersApplication.class).run(args());
    try {
      await().atMost(KafkaService.timeout()).untilAsserted(() -> {
        assertThat(applied()).isEqualTo(2L * (ORDERS_PER_CHANNEL + 200));
        assertThat(KAFKA.committedOffsets(run + "_group", topic)).isEqualTo(KAFKA.endOffsets(topic));
        assertThat(RABBIT.messageCount(queue)).isZero();
      });
    } finally {
      again.close();
    }
    assertThat(PG.count("SELECT count(DISTINCT order_id) FROM shop_orders WHERE order_id LIKE $1", run + "-%"))
        .isEqualTo(2L * (ORDERS_PER_CHANNEL + 200));
    Map<Long, long[]> end = customerTotals();
    for (long customer = 1; customer <= 50; customer++) {
      long[] want = expected.getOrDefault(customer, new long[2]);
      assertThat(end.get(customer)[1] - before.get(customer)[1]).as("total of customer %d", customer).isEqualTo(want[1]);
    }
    assertThat(RABBIT.messageCount(queue + ".dlq")).isZero();
  }
}
