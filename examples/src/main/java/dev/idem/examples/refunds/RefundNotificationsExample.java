package dev.idem.examples.refunds;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.examples.DemoEnvironment;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.stream.Collectors;
import reactor.core.publisher.Mono;

/**
 * Refund notifications over RabbitMQ (seed 2): a refund event inserts the refund and its
 * notification outbox row in the same transaction as the dedup row, so a redelivered refund
 * produces no second notification. The relay that sends outbox rows is not part of Idem yet;
 * this example stops at the outbox row.
 *
 * <p>Needs a RabbitMQ server; see {@link DemoEnvironment}. Run:
 * {@code mvn -q -pl examples -am package -DskipTests exec:java -Dexec.mainClass=dev.idem.examples.refunds.RefundNotificationsExample}
 */
public final class RefundNotificationsExample {

  /** Refunds applied. */
  public static final String REFUNDS = "idem_demo_refunds";
  /** Notifications waiting for the relay; the idempotency key is the refund event's id. */
  public static final String OUTBOX = "idem_demo_notification_outbox";

  private RefundNotificationsExample() {}

  /**
   * What the example observed.
   *
   * @param refunds distinct refund events published
   * @param published messages published, redeliveries included
   * @param processed deliveries that applied their refund
   * @param duplicates deliveries recognised as duplicates
   * @param notifications outbox rows written
   * @param maxNotificationsPerRefund the most outbox rows any refund has
   */
  public record Report(long refunds, long published, long processed, long duplicates, long notifications, long maxNotificationsPerRefund) {

    /**
     * Whether exactly one notification exists per refund.
     *
     * @return {@code true} on success
     */
    public boolean ok() {
      return processed == refunds && notifications == refunds && maxNotificationsPerRefund == 1 && duplicates == published - refunds;
    }

    @Override
    public String toString() {
      return String.join(System.lineSeparator(),
          "Refund notifications report",
          String.format("  refund events (distinct)          %6d", refunds),
          String.format("  messages published (with repeats) %6d", published),
          String.format("  refunds applied                   %6d", processed),
          String.format("  duplicates suppressed             %6d", duplicates),
          String.format("  notification outbox rows          %6d", notifications),
          String.format("  most notifications for one refund %6d", maxNotificationsPerRefund),
          ok() ? "RESULT: OK - one notification per refund" : "RESULT: FAILED");
    }
  }

  /**
   * The handler: the refund and its notification, in the message's transaction.
   *
   * @return the handler
   */
  public static Handler<String> handler() {
    return (amount, tx) -> tx.sql("INSERT INTO " + REFUNDS + " (refund_id, amount) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, Long.parseLong(amount.trim()))
        .execute()
        .then(tx.sql("INSERT INTO " + OUTBOX + " (idempotency_key, body) VALUES ($1, $2)")
            .bind(0, tx.messageId()).bind(1, "Your refund of " + amount.trim() + " cents is on its way")
            .execute());
  }

  /**
   * Runs the example and exits with 0 when every check passed.
   *
   * @param args flags, see {@link DemoEnvironment}; {@code --refunds=} (default 200)
   */
  public static void main(String[] args) {
    Report report = run(DemoEnvironment.fromArgs(args));
    System.out.println(report);
    System.exit(report.ok() ? 0 : 1);
  }

  /**
   * Runs the example.
   *
   * @param env services and flags
   * @return the report
   */
  public static Report run(DemoEnvironment env) {
    int refunds = env.intFlag("refunds", 200);
    String rabbitUri = env.rabbitUri();
    String run = Long.toString(System.currentTimeMillis(), 36);
    String queue = "idem-demo-refunds-" + run;
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), 8);
    try {
      PostgresInbox inbox = PostgresInbox.create(pool);
      inbox.createSchemaIfAbsent().block();
      Mono.usingWhen(pool.create(), c -> reactor.core.publisher.Flux.just(
              "DROP TABLE IF EXISTS " + OUTBOX, "DROP TABLE IF EXISTS " + REFUNDS,
              "CREATE TABLE " + REFUNDS + " (refund_id text PRIMARY KEY, amount bigint NOT NULL)",
              "CREATE TABLE " + OUTBOX + " (id bigserial PRIMARY KEY, idempotency_key text NOT NULL, body text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())")
          .concatMap(sql -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())))
          .then(), io.r2dbc.spi.Connection::close).block();

      // Refund ids are unique per run: the inbox remembers ids of earlier runs, as it should.
      long published = declareAndPublish(rabbitUri, queue, refunds, "refund-" + run + "-");

      IdempotentConsumer<String> notifications = IdempotentConsumer.<String>named("refund-notifications")
          .inbox(inbox)
          .handler(handler())
          .concurrency(8)
          .ordering(Ordering.UNORDERED)
          .build();
      try (RabbitSource<String> source = RabbitSource.create(
          RabbitSourceOptions.builder(queue).uri(rabbitUri).prefetch(32).build(), PayloadDecoder.utf8())) {
        Map<Outcome.Status, Long> outcomes = source.receive()
            .transform(notifications::process)
            .take(published)
            .collect(Collectors.groupingBy(Outcome::status, Collectors.counting()))
            .block(Duration.ofMinutes(2));
        long rows = count(pool, "SELECT count(*) FROM " + OUTBOX);
        long most = count(pool, "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM " + OUTBOX + " GROUP BY idempotency_key) per_refund");
        return new Report(refunds, published, outcomes.getOrDefault(Outcome.Status.PROCESSED, 0L),
            outcomes.getOrDefault(Outcome.Status.DUPLICATE, 0L), rows, most);
      } finally {
        deleteQueues(rabbitUri, queue);
      }
    } finally {
      pool.dispose();
    }
  }

  private static long declareAndPublish(String uri, String queue, int refunds, String idPrefix) {
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(uri);
      try (Connection connection = factory.newConnection("idem-refunds-example-publisher")) {
        RabbitTopology.declare(connection, queue, RabbitTopology.QueueType.CLASSIC);
        try (Channel channel = connection.createChannel()) {
          channel.confirmSelect();
          long published = 0;
          for (int i = 0; i < refunds; i++) {
            publish(channel, queue, idPrefix + i, 500 + i);
            published++;
            if (i % 10 == 3) { // the same refund event again: a redelivery from upstream
              publish(channel, queue, idPrefix + i, 500 + i);
              published++;
            }
          }
          channel.waitForConfirmsOrDie(30_000);
          return published;
        }
      }
    } catch (Exception e) {
      throw new IllegalStateException("Could not publish refunds to RabbitMQ at " + DemoEnvironment.hostAndPort(uri) + ": " + e, e);
    }
  }

  private static void publish(Channel channel, String queue, String refundId, long amount) throws java.io.IOException {
    AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId(refundId).deliveryMode(2).build();
    channel.basicPublish("", queue, props, Long.toString(amount).getBytes(StandardCharsets.UTF_8));
  }

  private static void deleteQueues(String uri, String queue) {
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(uri);
      try (Connection connection = factory.newConnection("idem-refunds-example-cleanup")) {
        RabbitTopology.delete(connection, queue);
      }
    } catch (Exception e) {
      System.err.println("[refunds] could not delete the example's queues: " + e);
    }
  }

  private static long count(ConnectionPool pool, String sql) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        io.r2dbc.spi.Connection::close).block();
  }
}
