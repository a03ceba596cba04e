package dev.idem.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Outbox rows are written in the message's transaction: with the effect, never for a duplicate, never after a rollback. */
class OutboxWriteIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final RetryPolicy FAST_RETRY = RetryPolicy.backoff(3, Duration.ofMillis(10));

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private PostgresOutbox outbox;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(8);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    outbox = PostgresOutbox.create(pool, PostgresService.uniqueName("outbox"));
    outbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("refunds");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (refund_id text PRIMARY KEY, amount int NOT NULL)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table(),
        "DROP TABLE IF EXISTS " + outbox.table());
    pool.dispose();
  }

  private Handler<Integer> refundWithNotification() {
    return (amount, tx) -> writeRefund(amount, tx);
  }

  private Mono<String> writeRefund(Integer amount, dev.idem.Tx tx) {
    return tx.sql("INSERT INTO " + effects + " (refund_id, amount) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, amount).execute()
        .then(tx.outbox(outbox, OutboxRecord.to("notifications").key("customer-7")
            .payload("refund " + amount).header("content-type", "text/plain").header("refund", tx.messageId()).build()));
  }

  private List<Map<String, Object>> outboxRows() {
    return postgres.query("SELECT message_id, destination, message_key, payload, headers::text AS headers, status, attempts FROM "
        + outbox.table() + " ORDER BY seq");
  }

  @Test
  void refundDeliveredThreeTimesWritesOneOutboxRowWithTheEffect() {
    TestDelivery<Integer> first = TestDelivery.of("refund-1", 250);
    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(refundWithNotification())
        .retry(FAST_RETRY).build()
        .process(Flux.just(first, first.redelivered(), first.redelivered()))
        .collectList().block(TIMEOUT);

    // Deliveries without an ordering key may overlap: which one is processed is not fixed, that one is.
    assertThat(outcomes).extracting(Outcome::status)
        .containsExactlyInAnyOrder(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE, Outcome.Status.DUPLICATE);
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(1);
    List<Map<String, Object>> rows = outboxRows();
    assertThat(rows).hasSize(1);
    Map<String, Object> row = rows.get(0);
    assertThat(UUID.fromString((String) row.get("message_id"))).isNotNull();
    assertThat(row).containsEntry("destination", "notifications").containsEntry("message_key", "customer-7")
        .containsEntry("status", "PENDING").containsEntry("attempts", 0);
    assertThat(new String(toBytes(row.get("payload")), StandardCharsets.UTF_8)).isEqualTo("refund 250");
    assertThat((String) row.get("headers")).contains("\"refund\": \"refund-1\"").contains("\"content-type\": \"text/plain\"");
  }

  @Test
  void failedTransactionLeavesNoOutboxRowAndItsRetryWritesOne() {
    AtomicInteger attempts = new AtomicInteger();
    Handler<Integer> failsAfterWritingOnce = (amount, tx) -> writeRefund(amount, tx)
        .then(Mono.defer(() -> attempts.incrementAndGet() == 1
            ? Mono.error(new IllegalStateException("boom after the outbox row"))
            : Mono.empty()));

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(h(failsAfterWritingOnce))
        .retry(FAST_RETRY).build()
        .process(Flux.just(TestDelivery.of("refund-2", 300))).collectList().block(TIMEOUT);

    assertThat(attempts).hasValue(2);
    assertThat(outcomes).extracting(Outcome::status).containsExactly(Outcome.Status.PROCESSED);
    assertThat(outboxRows()).hasSize(1);
  }

  @Test
  void deadLetteredMessageLeavesNoOutboxRow() {
    Handler<Integer> rejects = (amount, tx) -> writeRefund(amount, tx)
        .then(Mono.error(new NonRetryableException("refund refused by the bank")));

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(h(rejects))
        .retry(FAST_RETRY).build()
        .process(Flux.just(TestDelivery.of("refund-3", 400))).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::status).containsExactly(Outcome.Status.DEAD_LETTERED);
    assertThat(outboxRows()).isEmpty();
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).isZero();
  }

  @Test
  void batchedHandlerWritesOneOutboxRowPerNewMessage() {
    List<TestDelivery<Integer>> deliveries = List.of(TestDelivery.of("b-1", 1), TestDelivery.of("b-2", 2),
        TestDelivery.of("b-1", 1), TestDelivery.of("b-3", 3), TestDelivery.of("b-2", 2));

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .batchHandler((items, tx) -> Flux.fromIterable(items).concatMap(item -> tx.outbox(outbox,
            OutboxRecord.to("notifications").id(item.messageId() + "/notification")
                .payload(new byte[]{item.payload().byteValue()}).build())))
        .maxBatchSize(16).retry(FAST_RETRY).build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(5);
    assertThat(postgres.column("SELECT message_id FROM " + outbox.table() + " ORDER BY message_id"))
        .containsExactly("b-1/notification", "b-2/notification", "b-3/notification");
  }

  @Test
  void schemaQualifiedOutboxTableIsCreatedWithItsIndexes() {
    String schema = PostgresService.uniqueName("s");
    postgres.execute("CREATE SCHEMA " + schema);
    try {
      PostgresOutbox qualified = PostgresOutbox.create(pool, schema + ".idem_outbox");
      qualified.createSchemaIfAbsent().block(TIMEOUT);
      qualified.createSchemaIfAbsent().block(TIMEOUT);
      assertThat(postgres.column("SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname", schema))
          .containsExactly("idem_outbox_key_idx", "idem_outbox_parked_idx", "idem_outbox_pending_idx", "idem_outbox_pkey",
              "idem_outbox_sent_at_idx");
      assertThat(qualified.channel()).isEqualTo("idem_outbox");
    } finally {
      postgres.execute("DROP SCHEMA " + schema + " CASCADE");
    }
  }

  private static Handler<Integer> h(Handler<Integer> handler) {
    return handler;
  }

  private static byte[] toBytes(Object value) {
    if (value instanceof byte[] bytes) {
      return bytes;
    }
    java.nio.ByteBuffer buffer = (java.nio.ByteBuffer) value;
    byte[] bytes = new byte[buffer.remaining()];
    buffer.get(bytes);
    return bytes;
  }
}
