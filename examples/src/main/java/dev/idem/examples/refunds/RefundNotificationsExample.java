package dev.idem.examples.refunds;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.examples.DemoEnvironment;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.retention.Retention;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Refund notifications (seed 2) end to end, over RabbitMQ (default) or Kafka: every refund event
 * is delivered three times; the refunds consumer writes the refund and its notification's outbox
 * row in the same transaction as the dedup row, so the repeats write nothing; the outbox relay
 * publishes each notification once with the row's id as message id; a downstream Idem consumer
 * (the notification sender) applies each notification once. Retention runs beside the refunds
 * consumer.
 *
 * <p>Run: {@code mvn -q -pl examples -am package -DskipTests exec:java
 * -Dexec.mainClass=dev.idem.examples.refunds.RefundNotificationsExample} (add
 * {@code -Dexec.args="--broker=kafka"} for Kafka; RabbitMQ needs a server, see {@link DemoEnvironment}).
 */
public final class RefundNotificationsExample {

  /** Refunds applied. */
  public static final String REFUNDS = "idem_demo_refunds";
  /** The notification outbox. */
  public static final String OUTBOX = "idem_demo_notification_outbox";
  /** Notifications the downstream sender applied (sent to the customer). */
  public static final String SENT_NOTIFICATIONS = "idem_demo_sent_notifications";
  /** How often the upstream delivers each refund event. */
  public static final int DELIVERIES_PER_REFUND = 3;

  private RefundNotificationsExample() {}

  /**
   * What the example observed.
   *
   * @param broker {@code rabbit} or {@code kafka}
   * @param refunds distinct refund events
   * @param delivered refund deliveries, repeats included
   * @param refundRows refund rows written
   * @param duplicates refund deliveries recognised as duplicates
   * @param outboxRows notification outbox rows
   * @param relayed rows the relay marked sent
   * @param notificationsApplied notifications the downstream sender applied
   * @param mostNotificationsPerRefund the most notifications any refund produced downstream
   * @param distinctNotificationIds distinct message ids among the applied notifications
   */
  public record Report(String broker, long refunds, long delivered, long refundRows, long duplicates, long outboxRows,
      long relayed,
      long notificationsApplied, long mostNotificationsPerRefund, long distinctNotificationIds) {

    /**
     * Whether each refund gave exactly one refund row and one notification applied downstream.
     *
     * @return {@code true} on success
     */
    public boolean ok() {
      return refundRows == refunds && outboxRows == refunds && relayed == refunds && notificationsApplied == refunds
          && mostNotificationsPerRefund == 1 && distinctNotificationIds == refunds && duplicates == delivered - refunds;
    }

    @Override
    public String toString() {
      return String.join(System.lineSeparator(),
          "Refund notifications report (" + broker + ")",
          String.format("  refund events (distinct)                 %6d", refunds),
          String.format("  refund deliveries (each %d times)         %6d", DELIVERIES_PER_REFUND, delivered),
          String.format("  refunds applied                          %6d", refundRows),
          String.format("  duplicate deliveries suppressed          %6d", duplicates),
          String.format("  notification outbox rows                 %6d", outboxRows),
          String.format("  notifications relayed (marked sent)      %6d", relayed),
          String.format("  notifications applied downstream         %6d", notificationsApplied),
          String.format("  distinct notification ids downstream     %6d", distinctNotificationIds),
          String.format("  most notifications for one refund        %6d", mostNotificationsPerRefund),
          ok() ? "RESULT: OK - one refund and one notification per refund event" : "RESULT: FAILED");
    }
  }

  /**
   * The refunds consumer's handler: the refund and its notification's outbox row, in the
   * message's transaction.
   *
   * @param outbox the notification outbox
   * @param notifications where the relay sends notifications (queue or topic)
   * @return the handler
   */
  // tag::refund-handler[] (quoted in docs/outbox.md)
  public static Handler<String> refundHandler(PostgresOutbox outbox, String notifications) {
    return (amount, tx) -> tx.sql("INSERT INTO " + REFUNDS + " (refund_id, amount) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, Long.parseLong(amount.trim()))
        .execute()
        .then(tx.outbox(outbox, OutboxRecord.to(notifications)
            .key(tx.messageId())
            .payload("Your refund " + tx.messageId() + " of " + amount.trim() + " cents is on its way")
            .header("refund-id", tx.messageId())
            .build()));
  }
  // end::refund-handler[]

  /**
   * The downstream notification sender's handler: records the notification it sends, keyed by
   * the notification's message id (the outbox row's id).
   *
   * @return the handler
   */
  public static Handler<String> notificationSender() {
    return (text, tx) -> tx.sql("INSERT INTO " + SENT_NOTIFICATIONS + " (notification_id, body) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, text)
        .execute();
  }

  /**
   * Runs the example and exits with 0 when every check passed.
   *
   * @param args flags, see {@link DemoEnvironment}; {@code --broker=rabbit|kafka} (default rabbit),
   *     {@code --refunds=} (default 200)
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
    String brokerName = env.flag("broker", "rabbit");
    String run = Long.toString(System.currentTimeMillis(), 36);
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), 12);
    List<Disposable> running = new ArrayList<>();
    try (RefundBroker broker = switch (brokerName) {
      case "rabbit" -> new RabbitRefundBroker(env.rabbitUri(), run);
      case "kafka" -> new KafkaRefundBroker(env.kafkaBootstrap(), run);
      default -> throw new IllegalArgumentException("--broker must be rabbit or kafka, was " + brokerName);
    }) {
      createTables(pool);
      PostgresInbox inbox = PostgresInbox.create(pool);
      inbox.createSchemaIfAbsent().block();
      PostgresOutbox outbox = PostgresOutbox.create(pool, OUTBOX);
      outbox.createSchemaIfAbsent().block();

      // tag::refund-wiring[] (quoted in docs/outbox.md)
      IdempotentConsumer<String> refundsConsumer = IdempotentConsumer.<String>named("refunds")
          .inbox(inbox)
          .handler(refundHandler(outbox, broker.notificationsDestination()))
          .ordering(Ordering.BY_KEY)
          .build();
      OutboxRelay relay = OutboxRelay.builder(outbox, broker.publisher())
          .name("notifications")
          .build();
      IdempotentConsumer<String> notificationSender = IdempotentConsumer.<String>named("notification-sender")
          .inbox(inbox)
          .handler(notificationSender())
          .build();
      Retention retention = Retention.builder()
          .inbox(inbox, Duration.ofDays(14))
          .outbox(outbox, Duration.ofDays(2))
          .build();
      // end::refund-wiring[]

      AtomicLong duplicates = new AtomicLong();
      AtomicLong delivered = new AtomicLong();
      AtomicLong applied = new AtomicLong();
      // tag::refund-run[] (quoted in docs/outbox.md)
      running.add(broker.refunds()
          .transform(refundsConsumer::process)
          .transform(retention::alongside)
          .subscribe(outcome -> {
            delivered.incrementAndGet();
            if (outcome.status() == Outcome.Status.DUPLICATE) {
              duplicates.incrementAndGet();
            }
          }));
      running.add(relay.run().subscribe());
      running.add(broker.notifications()
          .transform(notificationSender::process)
          .subscribe(outcome -> applied.incrementAndGet()));
      // end::refund-run[]

      // Refund ids are unique per run: the inbox remembers ids of earlier runs, as it should.
      List<RefundBroker.RefundEvent> events = new ArrayList<>();
      for (int repeat = 0; repeat < DELIVERIES_PER_REFUND; repeat++) {
        for (int i = 0; i < refunds; i++) {
          events.add(new RefundBroker.RefundEvent("refund-" + run + "-" + i, 500 + i));
        }
      }
      broker.publishRefunds(events);

      waitFor(() -> delivered.get() >= events.size() && applied.get() >= refunds, Duration.ofMinutes(3));
      String runRefunds = "refund-" + run + "-%";
      return new Report(brokerName, refunds, delivered.get(),
          count(pool, "SELECT count(*) FROM " + REFUNDS + " WHERE refund_id LIKE '" + runRefunds + "'"),
          duplicates.get(),
          count(pool, "SELECT count(*) FROM " + OUTBOX + " WHERE message_key LIKE '" + runRefunds + "'"),
          count(pool, "SELECT count(*) FROM " + OUTBOX + " WHERE message_key LIKE '" + runRefunds + "' AND status = 'SENT'"),
          count(pool, "SELECT count(*) FROM " + SENT_NOTIFICATIONS + " WHERE body LIKE 'Your refund refund-" + run + "-%'"),
          count(pool, "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM " + SENT_NOTIFICATIONS
              + " WHERE body LIKE 'Your refund refund-" + run + "-%' GROUP BY body) AS per_refund"),
          count(pool, "SELECT count(DISTINCT notification_id) FROM " + SENT_NOTIFICATIONS
              + " WHERE body LIKE 'Your refund refund-" + run + "-%'"));
    } finally {
      running.forEach(Disposable::dispose);
      pool.dispose();
    }
  }

  private static void createTables(ConnectionPool pool) {
    Mono.usingWhen(pool.create(), c -> Flux.just(
        // Demo tables: each run starts afresh (the inbox keeps its ids; refund ids are unique per run).
        "DROP TABLE IF EXISTS " + OUTBOX, "DROP TABLE IF EXISTS " + REFUNDS, "DROP TABLE IF EXISTS " + SENT_NOTIFICATIONS,
        "CREATE TABLE IF NOT EXISTS " + REFUNDS + " (refund_id text PRIMARY KEY, amount bigint NOT NULL)",
        // No unique key on purpose: a notification sent twice would show as two rows.
        "CREATE TABLE IF NOT EXISTS " + SENT_NOTIFICATIONS + " (notification_id text NOT NULL, body text NOT NULL)")
        .concatMap(sql -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())))
        .then(), io.r2dbc.spi.Connection::close).block();
  }

  private static void waitFor(java.util.function.BooleanSupplier done, Duration timeout) {
    Flux.interval(Duration.ofMillis(50)).filter(tick -> done.getAsBoolean()).next()
        .timeout(timeout, Mono.error(() -> new IllegalStateException("the example did not finish within " + timeout)))
        .block();
  }

  private static long count(ConnectionPool pool, String sql) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        io.r2dbc.spi.Connection::close).block();
  }
}
