package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.outbox.RelayOrdering;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitOutboxPublisher;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.testing.OutboxTesting;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * A relay killed with SIGKILL in its own JVM after the broker confirmed a batch and before the
 * batch was marked sent: the rows stay pending, a restarted relay publishes them again with the
 * same ids, and the downstream Idem consumer applies each once.
 */
class RelayCrashIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final String RABBIT = DemoEnvironment.fromArgs().rabbitUri();

  @Test
  void relayKilledBetweenPublishAndMarkRepublishesWithTheSameIdsAndTheDownstreamConsumerAppliesEachOnce() throws Exception {
    PostgresService postgres = PostgresService.get();
    ConnectionPool pool = postgres.pool(8);
    String queue = PostgresService.uniqueName("crash_notifications");
    PostgresOutbox outbox = PostgresOutbox.create(pool, PostgresService.uniqueName("crash_outbox"));
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("crash_inbox"));
    String effects = PostgresService.uniqueName("crash_effects");
    Path log = Files.createTempFile("idem-relay-process", ".log");
    ConnectionFactory amqp = new ConnectionFactory();
    amqp.setUri(RABBIT);
    try (Connection admin = amqp.newConnection("idem-relay-crash-test")) {
      RabbitTopology.declare(admin, queue, RabbitTopology.QueueType.CLASSIC);
      outbox.createSchemaIfAbsent().block(TIMEOUT);
      inbox.createSchemaIfAbsent().block(TIMEOUT);
      postgres.execute("CREATE TABLE " + effects + " (notification_id text NOT NULL)");
      List<String> ids = OutboxTesting.write(pool, outbox,
          IntStream.range(0, 50).mapToObj(i -> OutboxRecord.to(queue).payload("notification " + i).build()).toList());

      // 1. A relay in its own JVM publishes the 50 rows, the broker confirms them, and it is killed before marking them.
      List<String> published = new CopyOnWriteArrayList<>();
      ChildProcess child = ChildProcess.start(RelayProcess.class, log, line -> {
        if (line.startsWith("PUBLISHED ")) {
          published.add(line);
        }
      }, postgres.url(), outbox.table(), RABBIT, "50", "stall-after-publish");
      try {
        await().atMost(TIMEOUT).until(() -> !published.isEmpty());
        child.kill();
      } finally {
        child.close();
      }
      assertThat(published.get(0)).startsWith("PUBLISHED 50 ");
      assertThat(messageCount(admin, queue)).as("the broker has the first copies").isEqualTo(50);
      assertThat(OutboxTesting.rows(postgres, outbox, "PENDING")).as("nothing was marked sent").isEqualTo(50);

      // 2. A new relay publishes them again, with the same ids, and marks them.
      try (RabbitOutboxPublisher publisher = RabbitOutboxPublisher.create(RABBIT)) {
        Disposable relay = OutboxRelay.builder(outbox, publisher).ordering(RelayOrdering.UNORDERED).build().run().subscribe();
        try {
          await().atMost(TIMEOUT).until(() -> OutboxTesting.rows(postgres, outbox, "SENT") == 50);
        } finally {
          relay.dispose();
        }
      }
      assertThat(messageCount(admin, queue)).as("each row was published twice").isEqualTo(100);

      // 3. The downstream consumer sees every id twice and applies it once.
      Map<Outcome.Status, AtomicInteger> outcomes = new ConcurrentHashMap<>();
      IdempotentConsumer<String> downstream = IdempotentConsumer.<String>named("crash-test-sender").inbox(inbox)
          .handler(
              (text, tx) -> tx.sql("INSERT INTO " + effects + " (notification_id) VALUES ($1)").bind(0, tx.messageId()).execute())
          .build();
      try (RabbitSource<String> source = RabbitSource.create(RabbitSourceOptions.builder(queue).uri(RABBIT).build(),
          PayloadDecoder.utf8())) {
        Disposable consuming = source.receive().transform(downstream::process)
            .subscribe(o -> outcomes.computeIfAbsent(o.status(), s -> new AtomicInteger()).incrementAndGet());
        try {
          await().atMost(TIMEOUT).until(() -> outcomes.values().stream().mapToInt(AtomicInteger::get).sum() == 100);
        } finally {
          consuming.dispose();
        }
      }
      assertThat(outcomes.get(Outcome.Status.PROCESSED)).hasValue(50);
      assertThat(outcomes.get(Outcome.Status.DUPLICATE)).hasValue(50);
      assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(50);
      assertThat(postgres.column("SELECT notification_id FROM " + effects)).containsExactlyInAnyOrderElementsOf(ids);
    } finally {
      try (Connection admin = amqp.newConnection("idem-relay-crash-cleanup")) {
        RabbitTopology.delete(admin, queue);
      }
      postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + outbox.table(),
          "DROP TABLE IF EXISTS " + inbox.table());
      pool.dispose();
      Files.deleteIfExists(log);
    }
  }

  private static long messageCount(Connection admin, String queue) throws Exception {
    try (Channel channel = admin.createChannel()) {
      return channel.queueDeclarePassive(queue).getMessageCount();
    }
  }
}
