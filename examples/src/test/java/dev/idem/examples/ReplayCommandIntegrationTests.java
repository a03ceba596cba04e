package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.examples.replay.ReplayCommand;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** The replay command on RabbitMQ: dead-lettered, fixed, replayed by the command, applied once. */
class ReplayCommandIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  // IDEM_RABBIT_URI, else 127.0.0.1:5672, else a failure that says how to provide one.
  private static final String RABBIT = DemoEnvironment.fromArgs().rabbitUri();

  @Test
  void replayCommandMovesARabbitDeadLetterBackWithItsIdAndItIsAppliedOnce() throws Exception {
    PostgresService postgres = PostgresService.get();
    String queue = PostgresService.uniqueName("replay_cmd");
    String effects = PostgresService.uniqueName("replay_effects");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL)");
    ConnectionFactory factory = new ConnectionFactory();
    factory.setUri(RABBIT);
    ConnectionPool pool = postgres.pool(4);
    try (Connection connection = factory.newConnection("replay-command-test")) {
      RabbitTopology.declare(connection, queue, RabbitTopology.QueueType.CLASSIC);
      try (Channel channel = connection.createChannel()) {
        channel.confirmSelect();
        channel.basicPublish("", queue, new AMQP.BasicProperties.Builder().messageId("refund-1").build(),
            "250".getBytes(StandardCharsets.UTF_8));
        channel.waitForConfirmsOrDie(10_000);
      }
      PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
      inbox.createSchemaIfAbsent().block(TIMEOUT);
      AtomicBoolean fixed = new AtomicBoolean();
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(queue).inbox(inbox)
          .handler((body, tx) -> fixed.get()
              ? tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute()
              : Mono.error(new NonRetryableException("refunds are switched off")))
          .build();
      List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
      try (RabbitSource<String> source = RabbitSource.create(RabbitSourceOptions.builder(queue).uri(RABBIT).build(),
          PayloadDecoder.utf8())) {
        Disposable running = source.receive().transform(consumer::process).subscribe(outcomes::add);
        try {
          await().atMost(TIMEOUT).until(() -> outcomes.size() == 1);
          assertThat(outcomes.get(0).status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
          fixed.set(true);

          DemoEnvironment env = DemoEnvironment.fromArgs("--rabbit=" + RABBIT, "--dlq=" + RabbitTopology.deadLetterQueue(queue),
              "--id=refund-1");
          assertThat(ReplayCommand.replay(env)).isEqualTo(1);
          await().atMost(TIMEOUT).until(() -> outcomes.size() == 2);
          assertThat(outcomes.get(1).status()).isEqualTo(Outcome.Status.PROCESSED);
          assertThat(outcomes.get(1).messageId()).isEqualTo("refund-1");
          assertThat(ReplayCommand.replay(env)).as("the dead letter left the DLQ").isZero();
        } finally {
          running.dispose();
        }
      } finally {
        RabbitTopology.delete(connection, queue);
      }
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = 'refund-1'")).isEqualTo(1);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + effects);
      pool.dispose();
    }
  }

  @Test
  void replayCommandRejectsFlagsNamingNoDeadLetterDestination() {
    assertThatThrownBy(() -> ReplayCommand.replay(DemoEnvironment.fromArgs("--id=x")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("usage: ReplayCommand");
  }
}
