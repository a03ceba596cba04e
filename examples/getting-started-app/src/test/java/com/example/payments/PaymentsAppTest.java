package com.example.payments;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresConnections;
import dev.idem.rabbit.RabbitTopology;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The application against a real PostgreSQL and RabbitMQ (127.0.0.1, or {@code POSTGRES_URL} and
 * {@code RABBIT_URI}): a payment sent twice is credited once, and one that is not a payment is
 * dead-lettered.
 */
class PaymentsAppTest {

  private static final String POSTGRES_URL = System.getenv().getOrDefault("POSTGRES_URL",
      "r2dbc:postgresql://postgres@127.0.0.1:5432/test");
  private static final String RABBIT_URI = System.getenv().getOrDefault("RABBIT_URI", "amqp://guest:guest@127.0.0.1:5672");

  private final String queue = "payments-test-" + System.nanoTime();
  private final ConnectionPool pool = PostgresConnections.pool(POSTGRES_URL, 8);

  @AfterEach
  void cleanUp() throws Exception {
    pool.dispose();
    try (Connection connection = rabbit()) {
      RabbitTopology.delete(connection, queue);
    }
  }

  private static Connection rabbit() throws Exception {
    ConnectionFactory factory = new ConnectionFactory();
    factory.setUri(RABBIT_URI);
    try {
      return factory.newConnection("payments-test");
    } catch (java.io.IOException e) {
      throw new IllegalStateException("this test needs RabbitMQ at " + RABBIT_URI
          + ": start one (rabbitmq-server -detached) or set RABBIT_URI", e);
    }
  }

  private void publish(Channel channel, String messageId, String body, String account) throws Exception {
    AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
        .messageId(messageId).headers(Map.of("account-id", account)).deliveryMode(2).build();
    channel.basicPublish("", queue, true, properties, body.getBytes(StandardCharsets.UTF_8));
  }

  private long balance(long account) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement("SELECT balance FROM accounts WHERE id = " + account).execute())
            .flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        c -> c.close()).block();
  }

  @Test
  void aPaymentSentTwiceIsCreditedOnceAndOneThatIsNotAPaymentIsDeadLettered() throws Exception {
    Flux<Outcome<Payment>> outcomes;
    try {
      outcomes = PaymentsApp.consume(pool, RABBIT_URI, "payments-test-" + System.nanoTime(), queue);
    } catch (RuntimeException e) {
      throw new IllegalStateException("this test needs PostgreSQL at " + POSTGRES_URL
          + ": start one or set POSTGRES_URL (an R2DBC URL)", e);
    }
    Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement("UPDATE accounts SET balance = 0 WHERE id IN (7, 8)").execute()),
        c -> c.close()).block();
    try (Connection connection = rabbit(); Channel channel = connection.createChannel()) {
      channel.confirmSelect();
      publish(channel, "pay-1", "7,700", "7");
      publish(channel, "pay-1", "7,700", "7");      // the same payment again
      publish(channel, "pay-2", "8,50", "8");
      publish(channel, "pay-3", "not a payment", "8");
      channel.waitForConfirmsOrDie(30_000);
    }

    List<Outcome<Payment>> seen = outcomes.take(4).collectList().block(Duration.ofSeconds(120));

    assertThat(seen).extracting(Outcome::status).containsExactlyInAnyOrder(
        Outcome.Status.PROCESSED, Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE, Outcome.Status.DEAD_LETTERED);
    assertThat(balance(7)).isEqualTo(700);
    assertThat(balance(8)).isEqualTo(50);
    try (Connection connection = rabbit(); Channel channel = connection.createChannel()) {
      assertThat(channel.queueDeclarePassive(queue).getMessageCount()).isZero();
      assertThat(channel.queueDeclarePassive(RabbitTopology.deadLetterQueue(queue)).getMessageCount()).isEqualTo(1);
    }
  }
}
