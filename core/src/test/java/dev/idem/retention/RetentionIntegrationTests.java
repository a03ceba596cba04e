package dev.idem.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.micrometer.MicrometerRetentionMetrics;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.OutboxTesting;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** Retention of processed ids and sent outbox rows against a real PostgreSQL. */
class RetentionIntegrationTests {

  static final Duration TIMEOUT = Duration.ofSeconds(120);
  /** Cleanup batches of a plain inbox within which the consumer must commit at least once. */
  private static final int STRETCH = 10;

  private final PostgresService postgres = PostgresService.get();
  private final List<Disposable> running = new ArrayList<>();
  private final List<String> tables = new ArrayList<>();
  private final List<String> functions = new ArrayList<>();
  private ConnectionPool pool;
  private String consumer;
  private String effects;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(12);
    consumer = PostgresService.uniqueName("consumer");
    effects = table("effects");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL, at timestamptz NOT NULL DEFAULT now())");
  }

  @AfterEach
  void tearDown() {
    running.forEach(Disposable::dispose);
    tables.forEach(t -> postgres.execute("DROP TABLE IF EXISTS " + t + " CASCADE"));
    functions.forEach(f -> postgres.execute("DROP FUNCTION IF EXISTS " + f));
    pool.dispose();
  }

  private String table(String prefix) {
    String name = PostgresService.uniqueName(prefix);
    tables.add(name);
    return name;
  }

  private PostgresInbox plainInbox() {
    PostgresInbox inbox = PostgresInbox.create(pool, table("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    return inbox;
  }

  private PostgresInbox rotatingInbox(Duration window, int periods) {
    return rotatingInbox(pool, window, periods);
  }

  private PostgresInbox rotatingInbox(ConnectionFactory connections, Duration window, int periods) {
    String name = table("rinbox");
    tables.add(name + "_layout");
    functions.add(name + "_record(text, text[])");
    PostgresInbox inbox = PostgresInbox.rotating(connections, name, window, periods);
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    return inbox;
  }

  private Handler<Integer> recordEffect() {
    return (value, tx) -> tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute();
  }

  private IdempotentConsumer<Integer> consumer(PostgresInbox inbox, ConsumerMetrics metrics) {
    return IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(recordEffect()).concurrency(4)
        .ordering(Ordering.UNORDERED).metrics(metrics).build();
  }

  private void insertOldIds(PostgresInbox inbox, int n, String age) {
    postgres.execute("INSERT INTO " + inbox.table() + " (consumer, message_id, processed_at) SELECT '" + consumer
        + "', 'old-' || i, now() - interval '"
        + age + "' FROM generate_series(1, " + n + ") AS i");
  }

  private long inboxRows(PostgresInbox inbox, String like) {
    return postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id LIKE $1", like);
  }

  @Test
  void tinyWindowRemovesOldIdsInBoundedBatchesAndKeepsYoungOnes() {
    PostgresInbox inbox = plainInbox();
    insertOldIds(inbox, 2_500, "2 hours");
    consumer(inbox, ConsumerMetrics.NONE).process(Flux.range(0, 50).map(i -> TestDelivery.of("young-" + i, i)))
        .blockLast(TIMEOUT);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();

    CleanupReport report = Retention.builder().inbox(inbox, Duration.ofHours(1)).batchSize(1_000)
        .metrics(new MicrometerRetentionMetrics(registry)).build().cleanupOnce().block(TIMEOUT);

    assertThat(inboxRows(inbox, "old-%")).isZero();
    assertThat(inboxRows(inbox, "young-%")).isEqualTo(50);
    assertThat(report.tables()).singleElement().satisfies(t -> {
      assertThat(t.removed()).isEqualTo(2_500);
      assertThat(t.batches()).isEqualTo(3);
      assertThat(t.oldestKept()).isLessThan(Duration.ofHours(1));
    });
    assertThat(registry.get(MicrometerRetentionMetrics.REMOVED).counter().count()).isEqualTo(2_500.0);
    assertThat(registry.get(MicrometerRetentionMetrics.BATCH).timer().count()).isEqualTo(3);
    assertThat(registry.get(MicrometerRetentionMetrics.OLDEST_KEPT_AGE).gauge().value()).isLessThan(3_600.0);
  }

  @Test
  void redeliveryOfAnIdInsideTheWindowIsStillADuplicateAfterCleanup() {
    PostgresInbox inbox = plainInbox();
    IdempotentConsumer<Integer> pipeline = consumer(inbox, ConsumerMetrics.NONE);
    TestDelivery<Integer> first = TestDelivery.of("refund-9", 9);
    pipeline.process(Flux.just(first)).blockLast(TIMEOUT);

    Retention.builder().inbox(inbox, Duration.ofSeconds(30)).build().cleanupOnce().block(TIMEOUT);
    List<Outcome<Integer>> again = pipeline.process(Flux.just(first.redelivered())).collectList().block(TIMEOUT);

    assertThat(again).extracting(Outcome::status).containsExactly(Outcome.Status.DUPLICATE);
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(1);
  }

  @Test
  void sentOutboxRowsOlderThanTheWindowGoWhilePendingAndParkedRowsStay() {
    PostgresOutbox outbox = PostgresOutbox.create(pool, table("outbox"));
    outbox.createSchemaIfAbsent().block(TIMEOUT);
    OutboxTesting.write(pool, outbox,
        IntStream.range(0, 30).mapToObj(i -> OutboxRecord.to("d").payload("p" + i).build()).toList());
    postgres.execute("UPDATE " + outbox.table() + " SET status = 'SENT', sent_at = now() - interval '3 days' WHERE seq <= 10",
        "UPDATE " + outbox.table() + " SET status = 'SENT', sent_at = now() WHERE seq > 10 AND seq <= 20",
        "UPDATE " + outbox.table() + " SET status = 'PARKED', created_at = now() - interval '9 days' WHERE seq > 25");

    CleanupReport report = Retention.builder().outbox(outbox, Duration.ofDays(1)).batchSize(4).build().cleanupOnce()
        .block(TIMEOUT);

    assertThat(report.removed()).isEqualTo(10);
    assertThat(postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE status = 'SENT'")).isEqualTo(10);
    assertThat(postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE status <> 'SENT'")).isEqualTo(10);
  }

  @Test
  void cleanupRunsByItselfAlongsideTheConsumerStream() {
    PostgresInbox inbox = plainInbox();
    insertOldIds(inbox, 300, "1 day");
    Retention retention = Retention.builder().inbox(inbox, Duration.ofHours(1)).interval(Duration.ofMillis(200)).build();
    List<Outcome<Integer>> outcomes = new CopyOnWriteArrayList<>();
    Flux<Delivery<Integer>> endless = Flux.<Delivery<Integer>>just(TestDelivery.of("live-1", 1)).concatWith(Flux.never());

    running.add(consumer(inbox, ConsumerMetrics.NONE).process(endless).transform(retention::alongside).subscribe(outcomes::add));

    await().atMost(TIMEOUT).until(() -> inboxRows(inbox, "old-%") == 0);
    await().atMost(TIMEOUT).until(() -> outcomes.size() == 1);
    assertThat(inboxRows(inbox, "live-%")).isEqualTo(1);
  }

  /**
   * The cleanup of a plain inbox goes in short batches, each its own transaction, with pauses
   * between them, so the live consumer keeps committing while it runs. Checked without timing,
   * on the order of events (one logical clock for the consumer's commits and the cleanup's
   * batches): the 200,000 old ids go in at least 100 batches of at most 2,000 rows; the consumer
   * commits between the first and the last batch, and within every {@value #STRETCH} consecutive
   * batches (the end of batch k and of batch k+{@value #STRETCH}), so it is never held up across
   * more than a few batches however many there are (a single consumer transaction may span two
   * quick batches under load; that is not a stall); the consumer's stream is still alive after
   * the last batch and every message it took settled as processed, with its effect. A cleanup that held one transaction or a lock on the inbox across
   * its batches would leave the consumer's transactions waiting across all of them.
   */
  @Test
  void cleanupOfAPlainInboxUnderAConcurrentStreamOfInsertsNeverStallsProcessing() {
    PostgresInbox inbox = plainInbox();
    insertOldIds(inbox, 200_000, "2 days");
    postgres.execute("ANALYZE " + inbox.table());
    Interleaving events = new Interleaving();
    Retention retention = Retention.builder().inbox(inbox, Duration.ofDays(1)).batchSize(2_000).batchPause(Duration.ofMillis(5))
        .metrics(events).build();

    Pauses pauses = measureWhileCleaning(inbox, retention, events, () -> inboxRows(inbox, "old-%") == 0);

    System.out.printf("RETENTION plain inbox: removed 200000 rows while processing %d messages; worst transaction %d ms, "
        + "p99 %d ms, median %d ms; longest cleanup batch %d ms; before the cleanup: worst %d ms, p99 %d ms; %d batches, "
        + "longest stretch of consecutive batches without a consumer commit between them: %d%n", pauses.transactions,
        pauses.worst.toMillis(), pauses.p99.toMillis(), pauses.median.toMillis(), pauses.longestBatch.toMillis(),
        pauses.baselineWorst.toMillis(), pauses.baselineP99.toMillis(), events.batches().size(),
        events.longestStretchWithoutCommit());
    assertThat(inboxRows(inbox, "old-%")).isZero();
    List<Long> batches = events.batches();
    assertThat(events.largestBatch()).as("rows removed by one batch").isLessThanOrEqualTo(2_000);
    assertThat(batches).as("cleanup batches").hasSizeGreaterThanOrEqualTo(100);
    assertThat(events.commitsBetween(batches.get(0), batches.get(batches.size() - 1)))
        .as("consumer commits between the first and the last cleanup batch").isPositive();
    for (int k = STRETCH; k < batches.size(); k++) {
      assertThat(events.commitsBetween(batches.get(k - STRETCH), batches.get(k)))
          .as("consumer commits between cleanup batches %d and %d of %d", k - STRETCH, k, batches.size()).isPositive();
    }
    assertThat(events.commitsBetween(batches.get(batches.size() - 1), Long.MAX_VALUE)).as("consumer commits after the last batch")
        .isPositive();
    assertSettled(pauses);
  }

  @Test
  void rotatingInboxKeepsEveryIdAtLeastTheWindowAndDropsOldSlotsWhileIdsStayUniqueAcrossSlots() {
    Duration window = Duration.ofSeconds(3);
    PostgresInbox inbox = rotatingInbox(window, 3); // period 1 s, 5 slots
    long period = inbox.rotatingLayout().period().toMillis();
    int slots = inbox.rotatingLayout().slots();
    IdempotentConsumer<Integer> pipeline = consumer(inbox, ConsumerMetrics.NONE);
    pipeline.process(Flux.just(TestDelivery.of("early", 0))).blockLast(TIMEOUT);
    long earlySlot = postgres.count("SELECT slot FROM " + inbox.table() + " WHERE message_id = 'early'");
    Set<String> emptied = ConcurrentHashMap.newKeySet();
    Retention retention = Retention.builder().inbox(inbox, window).interval(Duration.ofMillis(200))
        .lockTimeout(Duration.ofMillis(100))
        .metrics(new RetentionMetrics() {
          @Override
          public void batch(String partition, long removed, Duration took) {
            emptied.add(partition);
          }
        }).build();
    AtomicLong violations = new AtomicLong();
    AtomicLong sequence = new AtomicLong();
    // A live stream of new ids, one every 50 ms (ticks the pipeline has no room for are dropped, not failed),
    // and the cleanup schedule beside it.
    Flux<Delivery<Integer>> live = Flux.interval(Duration.ofMillis(50)).onBackpressureDrop()
        .map(i -> TestDelivery.of("live-" + sequence.incrementAndGet(), 1));
    running.add(pipeline.process(live).transform(retention::alongside).subscribe());
    // Watch that no id younger than the window is ever missing (its effect row has the same now()). The age is
    // taken against clock_timestamp(), read after the statement's snapshot: against now(), a TRUNCATE that
    // committed between the statement's start and its snapshot could look like an id gone too early.
    List<Throwable> watchErrors = new CopyOnWriteArrayList<>();
    running.add(Flux.interval(Duration.ofMillis(100), Schedulers.boundedElastic()).onBackpressureDrop()
        .concatMap(t -> Mono.fromCallable(() -> postgres.count(
            "SELECT count(*) FROM " + effects
                + " e WHERE e.at > clock_timestamp() - make_interval(secs => $1) AND NOT EXISTS (SELECT 1 FROM "
                + inbox.table() + " p WHERE p.message_id = e.message_id)",
            (double) window.toSeconds())))
        .subscribe(violations::addAndGet, watchErrors::add));

    // The early id is still a duplicate in a later slot, inside the window: a redelivery is new only when it
    // came (by the database's clock) a full window or more after the first delivery, as a stalled test thread can.
    await().atMost(TIMEOUT)
        .until(() -> postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE slot <> $1", earlySlot) > 0);
    Outcome<Integer> again = pipeline.process(Flux.just(TestDelivery.of("early", 0))).blockLast(TIMEOUT);
    if (again.status() != Outcome.Status.DUPLICATE) {
      assertThat(again.status()).isEqualTo(Outcome.Status.PROCESSED);
      assertThat(postgres
          .count("SELECT (extract(epoch FROM max(at) - min(at)) * 1000)::bigint FROM " + effects + " WHERE message_id = 'early'"))
          .as("ms between the early id and its redelivery that was not a duplicate").isGreaterThanOrEqualTo(window.toMillis());
    }

    // Its slot is emptied once its period is older than the window...
    await().atMost(TIMEOUT)
        .until(() -> postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id = 'early'") == 0);
    // ...every slot is emptied in its turn, and the live stream is still processed a full cycle of slots later...
    await().atMost(TIMEOUT).until(() -> emptied.size() == slots);
    String target = "live-" + (sequence.get() + slots * period / 50);
    await().atMost(TIMEOUT)
        .until(() -> postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", target) == 1);
    // ...with nothing younger than the window gone missing meanwhile.
    assertThat(watchErrors).isEmpty();
    assertThat(violations).hasValue(0);
    // Right after a period begins, the slot that just became due holds ids until the next run empties it: the
    // window's periods, the current one and that one. Once it is emptied, fewer slots hold ids and none is older
    // than the window plus a period; runs come every 200 ms, so a moment like that comes in every period.
    await().atMost(TIMEOUT)
        .until(() -> postgres.count(
            "SELECT count(*) FROM (SELECT count(DISTINCT slot) AS slots, min(processed_at) AS oldest FROM "
                + inbox.table() + ") AS s WHERE s.slots <= $1 AND s.oldest > now() - make_interval(secs => $2)",
            slots - 1,
            (double) (window.toMillis() + period) / 1000) == 1);
  }

  @Test
  void aDueSlotWhoseNextPeriodBeginsBeforeItsTruncateHoldsTheLockIsKeptWithTheIdsRecordedInIt() {
    // A cleanup decides from its transaction's start time that a slot is due, early in a period; its LOCK TABLE
    // is held back (as a starved client or a lock wait would) until the slot's next period has begun and a
    // consumer has recorded a new id in it. That id is younger than the window and must survive.
    LockGate gate = new LockGate(pool);
    Duration window = Duration.ofSeconds(3);
    PostgresInbox inbox = rotatingInbox(gate, window, 3); // period 1 s, 5 slots
    long period = inbox.rotatingLayout().period().toMillis();
    int slots = inbox.rotatingLayout().slots();
    Retention retention = Retention.builder().inbox(inbox, window).interval(Duration.ofMillis(200))
        .lockTimeout(Duration.ofMillis(100)).build();
    String currentSlot = "SELECT (floor(extract(epoch FROM now()) * 1000 / " + period + ")::bigint % " + slots + ")::int";
    for (int attempt = 1;; attempt++) {
      assertThat(attempt).as("attempts to catch a cleanup's TRUNCATE across a period boundary").isLessThanOrEqualTo(10);
      // An id an hour old in every slot, so that whichever slot is due has something to empty.
      postgres.execute("INSERT INTO " + inbox.table() + " (consumer, message_id, processed_at, slot) SELECT '" + consumer
          + "', 'old-' || s, now() - interval '1 hour', s FROM generate_series(0, " + (slots - 1)
          + ") AS s ON CONFLICT DO NOTHING");
      // Start the run early in a period, so that the due slot is not left alone as about to be reused.
      await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(10))
          .until(() -> postgres.count("SELECT (floor(extract(epoch FROM now()) * 1000)::bigint % " + period + ")") < period / 4);
      gate.arm();
      CompletableFuture<CleanupReport> run = retention.cleanupOnce().toFuture();
      await().atMost(TIMEOUT).until(() -> gate.held() != null || run.isDone());
      String partition = gate.held();
      if (partition == null) {
        continue; // the run found no due slot far enough from its reuse (a stalled test thread): again
      }
      int slot = Integer.parseInt(partition.substring(partition.lastIndexOf("_p") + 2));
      await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(10)).until(() -> postgres.count(currentSlot) == slot);
      String id = "fresh-" + attempt;
      assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + "_record($1, ARRAY['" + id + "'])", consumer))
          .isEqualTo(1);
      boolean inTheHeldSlot = postgres.count("SELECT slot FROM " + inbox.table() + " WHERE message_id = $1", id) == slot;
      gate.release();
      CleanupReport report = run.join();
      if (!inTheHeldSlot) {
        continue; // the period moved on again before the id was recorded (a stalled test thread): again
      }
      assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id = $1", id))
          .as("the new id in the reused slot")
          .isEqualTo(1);
      assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + "_record($1, ARRAY['" + id + "'])", consumer))
          .as("a redelivery of the new id").isZero();
      assertThat(report.tables()).singleElement().satisfies(t -> assertThat(t.skipped()).isEqualTo(1));
      return;
    }
  }

  /**
   * A due slot's {@code TRUNCATE} waits at most {@code lockTimeout} for its lock and gives up
   * otherwise, so the live consumer (whose new transactions queue behind a waiting
   * {@code TRUNCATE}) keeps committing while the cleanup runs. Checked without timing, on the
   * order of events (one logical clock for the consumer's commits and the cleanup's runs and
   * truncates): while a reader holds the full slot's lock, cleanup runs end having given up on it
   * (skipped), at least two (the reader lets go after the second), and the consumer commits between every two consecutive
   * runs; once the reader is gone the slot is truncated with the consumer committing before and
   * after it, no consumer transaction that committed was in flight across more than one
   * truncate, and every message the consumer took settled as processed, with its effect. A
   * {@code TRUNCATE} that waited for its lock without giving up would hold every later run, and
   * the consumer behind it, for as long as the reader holds the slot: no second run would give
   * up, and the wait for it would fail the test.
   */
  @Test
  void truncatingARotatingSlotUnderAConcurrentStreamOfInsertsGivesUpOnABusyLockAndNeverStallsProcessing() {
    Duration window = Duration.ofSeconds(4);
    PostgresInbox inbox = rotatingInbox(window, 2); // period 2 s, 4 slots
    Interleaving events = new Interleaving();
    Retention retention = Retention.builder().inbox(inbox, window).interval(Duration.ofMillis(200))
        .lockTimeout(Duration.ofMillis(200))
        .metrics(events).build();
    // Fill one slot with 100,000 ids of a period long past, as a day's worth of traffic would.
    long period = inbox.rotatingLayout().period().toMillis();
    String oldSlot = "(floor((extract(epoch FROM now()) * 1000 - 3600000) / " + period + ")::bigint % "
        + inbox.rotatingLayout().slots() + ")::int";
    postgres.execute("INSERT INTO " + inbox.table() + " (consumer, message_id, processed_at, slot) SELECT '" + consumer
        + "', 'old-' || i, now() - interval '1 hour', " + oldSlot + " FROM generate_series(1, 100000) AS i");
    // A reader holds the full slot's partition (as a long report would) until two runs gave up on it.
    int fullSlot = (int) postgres.count("SELECT slot FROM " + inbox.table() + " WHERE message_id = 'old-1'");
    SlotReader reader = new SlotReader(pool, inbox.slotPartition(fullSlot));
    running.add(reader::release);

    Pauses pauses = measureWhileCleaning(inbox, retention, events, () -> {
      if (events.skippedRuns().size() >= 2) {
        reader.release();
      }
      return inboxRows(inbox, "old-%") == 0;
    });

    System.out.printf("RETENTION rotating inbox: truncated 100000 rows while processing %d messages; worst transaction %d ms, "
        + "p99 %d ms, median %d ms; longest truncate %d ms; before the cleanup: worst %d ms, p99 %d ms%n", pauses.transactions,
        pauses.worst.toMillis(), pauses.p99.toMillis(), pauses.median.toMillis(), pauses.longestBatch.toMillis(),
        pauses.baselineWorst.toMillis(), pauses.baselineP99.toMillis());
    assertThat(inboxRows(inbox, "old-%")).isZero();
    List<Long> skipped = events.skippedRuns();
    assertThat(skipped).as("cleanup runs that gave up on the busy slot").hasSizeGreaterThanOrEqualTo(2);
    List<Long> runs = events.runs();
    for (int k = 1; k < runs.size(); k++) {
      assertThat(events.commitsBetween(runs.get(k - 1), runs.get(k)))
          .as("consumer commits between cleanup runs %d and %d of %d", k - 1, k,
              runs.size())
          .isPositive();
    }
    List<Long> truncates = events.batches();
    assertThat(truncates).as("truncates").isNotEmpty();
    assertThat(truncates.get(0)).as("the first truncate comes after the runs that gave up").isGreaterThan(skipped.get(1));
    assertThat(events.commitsBetween(runs.get(0), truncates.get(0))).as("consumer commits before the first truncate")
        .isPositive();
    assertThat(events.commitsBetween(truncates.get(truncates.size() - 1), Long.MAX_VALUE))
        .as("consumer commits after the last truncate")
        .isPositive();
    assertThat(events.transactionsAcrossMoreThanOne(truncates))
        .as("consumer transactions in flight across more than one truncate")
        .isEmpty();
    assertSettled(pauses);
  }

  @Test
  void aRotatingInboxConfiguredApartFromItsLayoutRowIsRefusedAndNoSlotIsEmptied() {
    PostgresInbox created = rotatingInbox(Duration.ofSeconds(6), 3); // the database's row: period 2 s, 5 slots
    for (int slot = 0; slot < 5; slot++) {
      postgres.execute("INSERT INTO " + created.slotPartition(slot) + " (consumer, message_id, processed_at, slot) VALUES ('"
          + consumer + "', 'id-" + slot + "', now(), " + slot + ")");
    }
    // The same table configured otherwise (period 10 s, 5 slots), as a migration's row and the code can disagree.
    PostgresInbox configured = PostgresInbox.rotating(pool, created.table(), Duration.ofSeconds(30), 3);
    Retention retention = Retention.builder().inbox(configured, Duration.ofSeconds(30)).interval(Duration.ofSeconds(1)).build();

    assertThatThrownBy(() -> configured.verifyLayout().block(TIMEOUT))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("was created with a period of 2000 ms and 5 slots, but is configured with 10000 ms and 5 slots");
    assertThatThrownBy(() -> retention.cleanupOnce().block(TIMEOUT)).hasMessageContaining("was created with a period of 2000 ms");
    assertThatThrownBy(() -> retention.alongside(Flux.just(1)).blockLast(TIMEOUT))
        .hasMessageContaining("was created with a period of 2000 ms");
    assertThat(inboxRows(created, "id-%")).isEqualTo(5);
    assertThat(created.verifyLayout().block(TIMEOUT)).isNull(); // the matching configuration passes

    postgres.execute("DELETE FROM " + created.table() + "_layout");
    assertThatThrownBy(() -> created.verifyLayout().block(TIMEOUT))
        .hasMessageContaining("has no layout row in " + created.table() + "_layout: insert (period_ms, slots) = (2000, 5)");
  }

  @Test
  void buildRefusesAnIntervalThatCannotEmptyARotatingSlotBeforeItIsReused() {
    PostgresInbox inbox = PostgresInbox.rotating(pool, "not_created", Duration.ofMinutes(10), 10);
    assertThatThrownBy(() -> Retention.builder().inbox(inbox, Duration.ofMinutes(10)).interval(Duration.ofMinutes(1)).build())
        .hasMessageContaining("interval PT1M must be at most half the period PT1M");
    assertThatThrownBy(() -> Retention.builder().inbox(inbox, Duration.ofMinutes(20)))
        .hasMessageContaining("inbox window PT20M exceeds the window PT10M");
  }

  /**
   * What the consumer's transactions looked like while a cleanup ran beside them. The durations
   * are reported, never asserted on; {@code taken} is how many messages the consumer's stream
   * had taken when it was stopped, {@code outcomes} what it emitted for them, {@code failure}
   * the error that ended it (null: it was still running), {@code effects} the effect rows of
   * the live messages.
   */
  private record Pauses(int transactions, Duration worst, Duration p99, Duration median, Duration longestBatch,
      Duration baselineWorst,
      Duration baselineP99, long taken, List<Outcome<Integer>> outcomes, Throwable failure, long effects) {}

  /** The consumer's stream was alive to the end, and every message it took settled as processed, with one effect each. */
  private static void assertSettled(Pauses pauses) {
    assertThat(pauses.failure).as("the error that ended the consumer's stream").isNull();
    assertThat(pauses.outcomes).as("outcomes of the messages the consumer took").hasSize((int) pauses.taken)
        .allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    assertThat(pauses.effects).as("effects of the live messages").isEqualTo(pauses.taken);
  }

  private Pauses measureWhileCleaning(PostgresInbox inbox, Retention retention, Interleaving events,
      java.util.function.BooleanSupplier done) {
    List<Long> durations = new CopyOnWriteArrayList<>();
    ConsumerMetrics timing = new ConsumerMetrics() {
      @Override
      public void transaction(Delivery<?> delivery, Duration duration, boolean committed) {
        durations.add(duration.toNanos());
      }
    };
    AtomicLong sequence = new AtomicLong();
    AtomicBoolean stopped = new AtomicBoolean();
    Flux<Delivery<Integer>> live = Flux.interval(Duration.ofMillis(2)).onBackpressureDrop().takeWhile(i -> !stopped.get())
        .map(i -> TestDelivery.of("live-" + sequence.incrementAndGet(), 1));
    List<Outcome<Integer>> outcomes = new CopyOnWriteArrayList<>();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    CompletableFuture<Void> ended = new CompletableFuture<>();
    running.add(consumer(inbox, events.consumerMetrics(timing)).process(live)
        .subscribe(outcomes::add, e -> {
          failure.set(e);
          ended.complete(null);
        }, () -> ended.complete(null)));
    await().atMost(TIMEOUT).until(() -> durations.size() > 300);
    // A snapshot first: a sub-list of a CopyOnWriteArrayList fails when the consumer appends while it is copied.
    List<Long> snapshot = List.copyOf(durations);
    List<Long> baseline = new ArrayList<>(snapshot.subList(100, snapshot.size()));
    baseline.sort(Long::compare);
    int cleaningFrom = snapshot.size();
    AtomicLong longestBatch = new AtomicLong();
    Disposable cleaning = retention.run().subscribe(report -> {
      events.run(report);
      report.tables().forEach(t -> longestBatch.accumulateAndGet(t.longestBatch().toNanos(), Math::max));
    });
    running.add(cleaning);
    await().atMost(TIMEOUT).until(done::getAsBoolean);
    // The cleanup stops once the run that was under way has reported (its events are all
    // recorded then), so that its last events come before the consumer's last commits: left
    // running, it would go on to empty slots of the live ids while the consumer stops.
    int runsSoFar = events.runs().size();
    await().atMost(TIMEOUT).until(() -> events.runs().size() > runsSoFar);
    cleaning.dispose();
    // 200 more messages committed and settled after the cleanup ended (counting those the source
    // emitted instead would count the prefetch buffer, which may hold 200 before any commits).
    int settledAfter = outcomes.size() + 200;
    await().atMost(TIMEOUT).until(() -> outcomes.size() > settledAfter);
    // Stop the source and let the consumer settle what it took (the stream completes only once it has).
    Throwable early = failure.get();
    stopped.set(true);
    ended.orTimeout(TIMEOUT.toSeconds(), TimeUnit.SECONDS).join();
    List<Long> during = List.copyOf(durations);
    List<Long> sorted = new ArrayList<>(during.subList(cleaningFrom, during.size()));
    sorted.sort(Long::compare);
    return new Pauses(sorted.size(), Duration.ofNanos(sorted.get(sorted.size() - 1)),
        Duration.ofNanos(sorted.get(sorted.size() * 99 / 100)),
        Duration.ofNanos(sorted.get(sorted.size() / 2)), Duration.ofNanos(longestBatch.get()),
        Duration.ofNanos(baseline.get(baseline.size() - 1)), Duration.ofNanos(baseline.get(baseline.size() * 99 / 100)),
        sequence.get(),
        List.copyOf(outcomes), early != null ? early : failure.get(),
        postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id LIKE 'live-%'"));
  }
}
