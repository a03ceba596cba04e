package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.RabbitHeaders;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * The RabbitMQ half of docs/getting-started.md run as a reader would: {@link GettingStarted#fromRabbit}
 * declares its queue with the dead-letter exchange and queue, then the getting-started handler
 * credits accounts from messages published with an AMQP {@code message-id} and the producer's
 * {@code account-id} header, against the real RabbitMQ and PostgreSQL: a repeat is a duplicate, and a
 * message without an id, an undecodable body and an unknown account each land in
 * {@code <queue>.dlq} with their reason.
 */
class RabbitSwapIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final RabbitService RABBIT = RabbitService.get();

  private final String queue = PostgresService.uniqueName("getting_started_payments");
  private final ConnectionPool pool = PG.pool(8);

  @AfterEach
  void cleanUp() throws Exception {
    pool.dispose();
    try (Connection connection = RABBIT.newConnection("getting-started-cleanup")) {
      RabbitTopology.delete(connection, queue);
    }
  }

  private void publish(String messageId, String body, String account) throws Exception {
    try (Channel channel = RABBIT.admin().createChannel()) {
      channel.confirmSelect();
      Map<String, Object> headers = new HashMap<>();
      if (account != null) {
        headers.put("account-id", account);
      }
      AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
          .messageId(messageId).headers(headers).deliveryMode(2).build();
      channel.basicPublish("", queue, true, properties, body.getBytes(StandardCharsets.UTF_8));
      channel.waitForConfirmsOrDie(30_000);
    }
  }

  @Test
  void paymentsFromRabbitMqAreCreditedOnceAndTheBadOnesAreDeadLetteredWithTheirReason() throws Exception {
    PG.execute("CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)",
        "INSERT INTO accounts (id) VALUES (201), (202) ON CONFLICT (id) DO UPDATE SET balance = 0",
        "DELETE FROM accounts WHERE id = 999");
    PostgresInbox inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block();
    String consumerName = PostgresService.uniqueName("getting_started");
    IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named(consumerName)
        .inbox(inbox)
        .handler(GettingStarted.creditAccount())
        .build();

    Flux<Outcome<Payment>> outcomes = GettingStarted.fromRabbit(payments, RABBIT.uri(), queue); // declares the queues
    publish("p-1", "201,500", "201");
    publish("p-1", "201,500", "201");       // the same payment again: a duplicate
    publish("p-2", "202,300", "202");
    publish("p-3", "201,100", "201");
    publish(null, "201,1", "201");          // no message-id
    publish("p-bad", "garbage", "201");     // not "<account>,<amountCents>"
    publish("p-999", "999,5", "999");       // an account that does not exist

    List<Outcome<Payment>> seen = outcomes.take(7).collectList().block(Duration.ofSeconds(120));

    assertThat(seen).extracting(Outcome::status).containsExactlyInAnyOrder(
        Outcome.Status.PROCESSED, Outcome.Status.PROCESSED, Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE,
        Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED);
    assertThat(seen).filteredOn(o -> "p-2".equals(o.messageId()))
        .extracting(o -> o.delivery().orderingKey()).containsExactly("202");
    assertThat(PG.count("SELECT balance FROM accounts WHERE id = 201")).isEqualTo(600);
    assertThat(PG.count("SELECT balance FROM accounts WHERE id = 202")).isEqualTo(300);
    assertThat(PG.count("SELECT count(*) FROM processed_messages WHERE consumer = $1", consumerName)).isEqualTo(3);
    assertThat(RABBIT.messageCount(queue)).isZero();
    List<GetResponse> deadLetters = RABBIT.drain(queue + ".dlq");
    assertThat(deadLetters.stream().collect(Collectors.toMap(
        d -> String.valueOf(d.getProps().getMessageId()),
        d -> String.valueOf(d.getProps().getHeaders().get(RabbitHeaders.REASON)))))
        .containsExactlyInAnyOrderEntriesOf(Map.of(
            "null", "MISSING_ID", "p-bad", "UNDECODABLE_PAYLOAD", "p-999", "NON_RETRYABLE_ERROR"));
  }
}
