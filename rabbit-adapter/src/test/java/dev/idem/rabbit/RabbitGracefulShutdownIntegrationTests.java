package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import dev.idem.GracefulShutdown;
import dev.idem.Handler;
import dev.idem.MessageMetadata;
import dev.idem.Outcome;
import dev.idem.ShutdownReport;
import dev.idem.testing.PostgresService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Mono;

/**
 * A graceful stop of a RabbitMQ consumer against the real broker and PostgreSQL: the messages
 * completed during the grace period are acknowledged on the still-open channel, the others go
 * back to the queue, and the next consumer applies them, each message once overall. The handler
 * writes the message's metadata, so the same run checks what {@link MessageMetadata} shows on
 * RabbitMQ.
 */
class RabbitGracefulShutdownIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final int MESSAGES = 100;

  private static Handler<String> metadataHandler(RabbitFixture f, Duration linger) {
    return (payload, tx) -> {
      MessageMetadata m = tx.metadata();
      return tx.sql("INSERT INTO " + f.effects + "_meta (message_id, exchange, routing_key, queue, trace, redelivered, attempt) "
          + "VALUES ($1, $2, $3, $4, $5, $6, $7)")
          .bind(0, m.messageId())
          .bind(1, m.broker().get(MessageMetadata.RABBITMQ_EXCHANGE))
          .bind(2, m.broker().get(MessageMetadata.RABBITMQ_ROUTING_KEY))
          .bind(3, m.broker().get(MessageMetadata.RABBITMQ_QUEUE))
          .bind(4, m.header("trace").orElse("<none>"))
          .bind(5, Boolean.parseBoolean(m.broker().get(MessageMetadata.RABBITMQ_REDELIVERED)))
          .bind(6, m.deliveryAttempt())
          .execute()
          .then(Mono.delay(linger));
    };
  }

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 8})
  void stopAcksWhatCompletedDuringGraceLeavesTheRestQueuedAndTheNextConsumerAppliesItOnce(int maxBatchSize) throws Exception {
    try (RabbitFixture f = new RabbitFixture("graceful", RabbitTopology.QueueType.CLASSIC)) {
      f.postgres.execute("CREATE TABLE " + f.effects + "_meta (message_id text NOT NULL, exchange text NOT NULL, "
          + "routing_key text NOT NULL, queue text NOT NULL, trace text NOT NULL, redelivered boolean NOT NULL, attempt int NOT NULL)");
      String exchange = PostgresService.uniqueName("graceful_ex");
      String routingKey = "rk-" + f.queue;
      try {
        publishThroughExchange(f, exchange, routingKey);
        assertThat(f.rabbit.messageCount(f.queue)).isEqualTo(MESSAGES);

        GracefulShutdown shutdown = GracefulShutdown.create();
        List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
        AtomicBoolean completed = new AtomicBoolean();
        RabbitSource<String> source = f.source(f.options().prefetch(16).build());
        f.consumer(metadataHandler(f, Duration.ofMillis(100))).concurrency(4).maxBatchSize(maxBatchSize).build()
            .process(source.receive(), shutdown)
            .subscribe(outcomes::add, error -> {}, () -> completed.set(true));
        await().atMost(TIMEOUT).until(() -> outcomes.size() >= 8);

        ShutdownReport report = shutdown.stop(Duration.ofSeconds(30)).block(TIMEOUT);
        source.close();

        assertThat(completed.get()).isTrue();
        assertThat(report.abandonedInFlight()).isZero();
        assertThat(report.withinGracePeriod()).isTrue();
        long applied = f.postgres.count("SELECT count(*) FROM " + f.effects + "_meta");
        assertThat(applied).isEqualTo(outcomes.size()).isLessThan(MESSAGES);
        // Acked ones are gone for good; every other message is back on the queue.
        await().atMost(TIMEOUT).untilAsserted(() -> assertThat(f.rabbit.messageCount(f.queue)).isEqualTo(MESSAGES - applied));

        RabbitSource<String> next = f.source(f.options().build());
        f.run(next, f.consumer(metadataHandler(f, Duration.ZERO)).maxBatchSize(maxBatchSize).build());
        await().atMost(TIMEOUT).untilAsserted(() -> assertThat(f.settled).hasSize((int) (MESSAGES - applied)));
        f.stopConsumers();

        assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + "_meta")).isEqualTo(MESSAGES);
        assertThat(f.postgres.count("SELECT count(DISTINCT message_id) FROM " + f.effects + "_meta")).isEqualTo(MESSAGES);
        assertThat(f.settled).allMatch(o -> o.status() == Outcome.Status.PROCESSED);
        assertThat(f.rabbit.messageCount(f.queue)).isZero();
        for (int i = 0; i < MESSAGES; i++) {
          List<Map<String, Object>> rows = f.postgres.query("SELECT exchange, routing_key, queue, trace FROM " + f.effects
              + "_meta WHERE message_id = $1", "msg-" + i);
          assertThat(rows).hasSize(1);
          assertThat(rows.get(0)).containsEntry("exchange", exchange).containsEntry("routing_key", routingKey)
              .containsEntry("queue", f.queue).containsEntry("trace", "t-" + i);
        }
        // Messages the first consumer received but did not start came back redelivered.
        if (report.notStarted() > 0) {
          assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + "_meta WHERE redelivered AND attempt >= 2"))
              .isPositive();
        }
      } finally {
        f.postgres.execute("DROP TABLE IF EXISTS " + f.effects + "_meta");
        try (Channel channel = f.rabbit.admin().createChannel()) {
          channel.exchangeDelete(exchange);
        }
      }
    }
  }

  private static void publishThroughExchange(RabbitFixture f, String exchange, String routingKey) throws Exception {
    try (Channel channel = f.rabbit.admin().createChannel()) {
      channel.exchangeDeclare(exchange, "direct", false);
      channel.queueBind(f.queue, exchange, routingKey);
      channel.confirmSelect();
      for (int i = 0; i < MESSAGES; i++) {
        AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId("msg-" + i).deliveryMode(2)
            .headers(Map.of("trace", "t-" + i)).build();
        channel.basicPublish(exchange, routingKey, true, props, ("payload-" + i).getBytes(StandardCharsets.UTF_8));
      }
      channel.waitForConfirmsOrDie(120_000);
    }
  }
}
