package dev.idem.examples.outbox;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.examples.DemoEnvironment;
import dev.idem.kafka.KafkaOutboxPublisher;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.outbox.RelayOrdering;
import dev.idem.postgres.PostgresConnections;
import dev.idem.rabbit.RabbitOutboxPublisher;
import dev.idem.rabbit.RabbitTopology;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import reactor.core.publisher.Mono;

/**
 * Measures the outbox relay's throughput: writes {@code --rows} pending rows (one statement), then
 * times a relay sending them all to RabbitMQ or Kafka until the last is marked sent.
 *
 * <p>Run: {@code mvn -q -pl examples -am package -DskipTests exec:java
 * -Dexec.mainClass=dev.idem.examples.outbox.OutboxRelayThroughput -Dexec.args="--broker=kafka --rows=20000"}.
 * Flags: {@code --broker=rabbit|kafka} (default rabbit), {@code --rows=} (20,000),
 * {@code --batch=} (500), {@code --workers=} (2), {@code --ordering=UNORDERED|BY_KEY}
 * (UNORDERED), {@code --keys=} (100), plus the service flags of {@link DemoEnvironment}.
 */
public final class OutboxRelayThroughput {

  private OutboxRelayThroughput() {}

  /**
   * Runs the measurement and prints one line.
   *
   * @param args flags
   */
  public static void main(String[] args) {
    DemoEnvironment env = DemoEnvironment.fromArgs(args);
    System.out.println(run(env));
    System.exit(0);
  }

  /**
   * Runs the measurement.
   *
   * @param env services and flags
   * @return a line with the result
   */
  public static String run(DemoEnvironment env) {
    String broker = env.flag("broker", "rabbit");
    int rows = env.intFlag("rows", 20_000);
    int batch = env.intFlag("batch", 500);
    int workers = env.intFlag("workers", 2);
    int keys = env.intFlag("keys", 100);
    RelayOrdering ordering = RelayOrdering.valueOf(env.flag("ordering", "UNORDERED"));
    String run = Long.toString(System.currentTimeMillis(), 36);
    String destination = "idem-bench-outbox-" + run;
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), workers + 2);
    PostgresOutbox outbox = PostgresOutbox.create(pool, "idem_bench_outbox_" + run);
    OutboxPublisher publisher = null;
    try {
      outbox.createSchemaIfAbsent().block();
      execute(pool, "INSERT INTO " + outbox.table() + " (message_id, destination, message_key, payload)"
          + " SELECT gen_random_uuid()::text, '" + destination + "', 'key-' || (i % " + keys + "),"
          + " convert_to(repeat('x', 200) || i, 'UTF8') FROM generate_series(1, " + rows + ") AS i");
      execute(pool, "ANALYZE " + outbox.table());
      publisher = switch (broker) {
        case "rabbit" -> {
          declareQueue(env.rabbitUri(), destination);
          yield RabbitOutboxPublisher.create(env.rabbitUri());
        }
        case "kafka" -> {
          createTopic(env.kafkaBootstrap(), destination);
          yield KafkaOutboxPublisher.create(env.kafkaBootstrap());
        }
        default -> throw new IllegalArgumentException("--broker must be rabbit or kafka, was " + broker);
      };
      OutboxRelay relay = OutboxRelay.builder(outbox, publisher).ordering(ordering).batchSize(batch).workers(workers).build();
      long start = System.nanoTime();
      relay.run().take(rows).blockLast(Duration.ofMinutes(30));
      double seconds = (System.nanoTime() - start) / 1e9;
      return String.format("OUTBOX RELAY %s: %d rows (%s, batch %d, %d worker(s), %d keys) in %.1f s = %.0f rows/s",
          broker, rows, ordering, batch, workers, keys, seconds, rows / seconds);
    } finally {
      if (publisher instanceof AutoCloseable closeable) {
        try {
          closeable.close();
        } catch (Exception e) {
          System.err.println("closing the publisher failed: " + e);
        }
      }
      if (broker.equals("rabbit")) {
        deleteQueue(env.rabbitUri(), destination);
      }
      execute(pool, "DROP TABLE IF EXISTS " + outbox.table());
      pool.dispose();
    }
  }

  private static void execute(ConnectionPool pool, String sql) {
    Mono.usingWhen(pool.create(), c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())),
        io.r2dbc.spi.Connection::close).block();
  }

  private static void declareQueue(String uri, String queue) {
    withRabbit(uri, connection -> RabbitTopology.declare(connection, queue, RabbitTopology.QueueType.CLASSIC));
  }

  private static void deleteQueue(String uri, String queue) {
    withRabbit(uri, connection -> RabbitTopology.delete(connection, queue));
  }

  private interface RabbitWork {
    void run(Connection connection) throws Exception;
  }

  private static void withRabbit(String uri, RabbitWork work) {
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(uri);
      try (Connection connection = factory.newConnection("idem-outbox-bench")) {
        work.run(connection);
      }
    } catch (Exception e) {
      throw new IllegalStateException("RabbitMQ at " + DemoEnvironment.hostAndPort(uri) + ": " + e, e);
    }
  }

  private static void createTopic(String bootstrap, String topic) {
    try (Admin admin = Admin.create(Map.<String, Object>of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("Could not create topic " + topic + ": " + e, e);
    }
  }
}
