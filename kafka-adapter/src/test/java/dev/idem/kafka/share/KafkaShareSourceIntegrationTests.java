package dev.idem.kafka.share;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.BatchItem;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.kafka.DeadLetterRecord;
import dev.idem.kafka.KafkaDeadLetterReplayer;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.ShareGroups;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * {@link KafkaShareSource} against a real Kafka 4.2+ broker (share groups) and a real PostgreSQL:
 * exactly one effect per message id across several share consumers, duplicates acknowledged,
 * poison and failing records dead-lettered and rejected, a handler slower than the acquisition
 * lock, a stop that releases what it held, and an order the source cannot keep refused.
 */
class KafkaShareSourceIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  /** The groups' acquisition lock here (the broker's default is 30 s), so that a record nobody settled comes back soon. */
  private static final Duration LOCK = Duration.ofSeconds(4);
  /** Longer than two locks: a record neither accepted nor rejected is handed out again within it. */
  private static final Duration LEFT_OVER_WINDOW = LOCK.multipliedBy(2).plusSeconds(1);

  private final KafkaService kafka = KafkaService.get();
  private final PostgresService pg = PostgresService.get();
  private String topic;
  private String group;
  private String consumerName;
  private String table;
  private ConnectionPool pool;
  private PostgresInbox inbox;

  @BeforeEach
  void setUp() {
    String name = KafkaService.uniqueName("share");
    topic = name + "_topic";
    group = name + "_group";
    consumerName = name + "_consumer";
    table = name + "_effects";
    kafka.createTopic(topic, 3);
    kafka.createTopic(topic + ".DLT", 1);
    ShareGroups.configure(kafka, group, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms",
        Long.toString(LOCK.toMillis())));
    pg.execute("CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, payload text NOT NULL)");
    pool = pg.pool(16);
    inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
  }

  @AfterEach
  void tearDown() {
    pg.execute("DROP TABLE IF EXISTS " + table, "DELETE FROM " + inbox.table() + " WHERE consumer = '" + consumerName + "'");
    pool.dispose();
  }

  /** The handler styles a user writes: one message at a time, or a set-based statement over a batch. */
  enum Style {
    HANDLER, BATCH_HANDLER
  }

  @ParameterizedTest
  @EnumSource(Style.class)
  void twoSourcesApplyEveryIdOnceAcknowledgeDuplicatesDeadLetterPoisonAndLeaveNothingInTheGroup(Style style) {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      records.add(KafkaService.record(topic, i % 3, "k" + i, "m-" + i, "pay " + i));
    }
    for (int i = 0; i < 30; i++) {
      records.add(KafkaService.record(topic, (i + 1) % 3, "k" + i, "m-" + i, "pay " + i));
    }
    ProducerRecord<byte[], byte[]> poison = new ProducerRecord<>(topic, 1, "kp".getBytes(StandardCharsets.UTF_8),
        StrictUtf8Deserializer.POISON);
    poison.headers().add("message-id", "poison-1".getBytes(StandardCharsets.UTF_8));
    records.add(poison);
    records.add(KafkaService.record(topic, 2, "kf", "fail-1", "always-fail"));
    kafka.sendAll(records);

    Queue<Outcome<String>> outcomes = new ConcurrentLinkedQueue<>();
    List<Disposable> running = new ArrayList<>();
    List<KafkaShareSource<String>> sources = List.of(KafkaShareSource.create(options().build(), 2),
        KafkaShareSource.create(options().build(), 2));
    try {
      for (KafkaShareSource<String> source : sources) {
        IdempotentConsumer<String> consumer = style == Style.HANDLER ? consumer(recording()) : batchConsumer();
        running.add(consumer.process(source.receive()).subscribe(outcomes::add, e -> e.printStackTrace()));
      }
      await().atMost(TIMEOUT).untilAsserted(() -> {
        assertThat(processedIds(outcomes)).hasSize(300);
        assertThat(outcomes).filteredOn(o -> o.status() == Outcome.Status.DEAD_LETTERED).extracting(Outcome::messageId)
            .contains("poison-1", "fail-1");
        assertThat(outcomes).filteredOn(o -> o.status() == Outcome.Status.DUPLICATE).hasSizeGreaterThanOrEqualTo(30);
      });
      awaitQuiet(outcomes);
    } finally {
      running.forEach(Disposable::dispose);
      sources.forEach(KafkaShareSource::close);
    }
    assertThat(ShareGroups.leftOver(kafka, group, topic, LEFT_OVER_WINDOW)).isEmpty();
    assertThat(pg.count("SELECT count(*) FROM " + table)).isEqualTo(300);
    assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(300);
    List<DeadLetterRecord> letters = KafkaDeadLetterReplayer.create(kafka.bootstrapServers()).read(topic + ".DLT");
    // At least once on the dead-letter topic too: a record whose lock ran out before its REJECT is dead-lettered again.
    assertThat(letters).extracting(DeadLetterRecord::messageId).containsOnly("poison-1", "fail-1").contains("poison-1", "fail-1");
    assertThat(letters).filteredOn(l -> l.messageId().equals("poison-1")).extracting(DeadLetterRecord::reason)
        .containsOnly("UNDECODABLE_PAYLOAD");
    assertThat(letters).filteredOn(l -> l.messageId().equals("fail-1")).extracting(DeadLetterRecord::reason)
        .containsOnly("RETRIES_EXHAUSTED");
  }

  /**
   * A handler three times slower than the lock. kafka-clients 4.2+ renew the lock: the record is
   * delivered once and applied once. kafka-clients 4.1 cannot: the lock runs out, the other source
   * gets the record, and the dedup row makes that copy a duplicate.
   *
   * <p>The records are on two partitions, so a consumer may be handed the slow one alone. Its
   * renewals must not fetch the quick one into that consumer's buffer, where its lock would run out
   * (before the fix, about half the runs with kafka-clients 4.4.0 lost it so).
   */
  @Test
  void aHandlerSlowerThanTheAcquisitionLockAppliesItsMessageOnce() {
    ShareGroups.configure(kafka, group, Map.of("share.record.lock.duration.ms", "3000"));
    kafka.sendAll(
        List.of(KafkaService.record(topic, 0, "ks", "slow-1", "slow"), KafkaService.record(topic, 1, "kq", "quick-1", "quick")));
    Queue<Outcome<String>> outcomes = new ConcurrentLinkedQueue<>();
    List<Disposable> running = new ArrayList<>();
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    List<KafkaShareSource<String>> sources = List.of(KafkaShareSource.create(options().meterRegistry(meters).build()),
        KafkaShareSource.create(options().meterRegistry(meters).build()));
    IdempotentConsumer<String> consumer = consumer((payload,
        tx) -> (payload.equals("slow") && tx.metadata().deliveryAttempt() == 1
            ? Mono.delay(Duration.ofSeconds(9)).then()
            : Mono.<Void>empty()).then(Mono.from(recording().handle(payload, tx))).then());
    boolean renews = ShareGroups.clientRenewsLocks();
    try {
      for (KafkaShareSource<String> source : sources) {
        running.add(consumer.process(source.receive()).subscribe(outcomes::add));
      }
      await().atMost(TIMEOUT).untilAsserted(() -> {
        assertThat(processedIds(outcomes)).containsExactlyInAnyOrder("quick-1", "slow-1");
        if (!renews) {
          // The lock ran out under the slow handler: the record's second delivery is found a duplicate.
          assertThat(outcomes).filteredOn(o -> "slow-1".equals(o.messageId()) && o.status() == Outcome.Status.DUPLICATE)
              .isNotEmpty();
        }
      });
      // A copy delivered while the first still held the dedup row waits for that row's lock, and can
      // outlive its own acquisition lock too: the chain ends one lock after the first commit.
      awaitQuiet(outcomes);
      assertThat(meters.find("kafka.consumer.share.fetch.manager.records.consumed.total").functionCounters())
          .as("the share consumers' client metrics, bound to the registry").isNotEmpty()
          .extracting(FunctionCounter::count)
          .satisfies(counts -> assertThat(counts.stream().mapToDouble(Double::doubleValue).sum())
              .isGreaterThanOrEqualTo(2));
    } finally {
      running.forEach(Disposable::dispose);
      sources.forEach(KafkaShareSource::close);
    }
    assertThat(ShareGroups.leftOver(kafka, group, topic, LEFT_OVER_WINDOW)).isEmpty();
    assertThat(pg.column("SELECT message_id FROM " + table + " ORDER BY message_id")).containsExactly("quick-1", "slow-1");
    List<Outcome<String>> slow = outcomes.stream().filter(o -> "slow-1".equals(o.messageId())).toList();
    assertThat(slow).filteredOn(o -> o.status() == Outcome.Status.PROCESSED).hasSize(1);
    double renewed = meters.counter(KafkaShareSource.RENEWED_LOCKS_METRIC, "idem.source", group).count();
    if (renews) {
      // Renewed every 1.5 s for 9 s: delivered once, to one consumer, and never handed to the other.
      assertThat(slow).singleElement().satisfies(o -> assertThat(o.delivery().deliveryAttempt()).isEqualTo(1));
      assertThat(renewed).isGreaterThanOrEqualTo(4);
      assertThat(meters.counter(KafkaShareSource.LOST_LOCKS_METRIC, "idem.source", group).count()).isZero();
    } else {
      assertThat(slow).filteredOn(o -> o.status() == Outcome.Status.DUPLICATE)
          .allSatisfy(o -> assertThat(o.delivery().deliveryAttempt()).isGreaterThanOrEqualTo(2));
      assertThat(renewed).isZero();
    }
  }

  /**
   * A renewal fetches nothing. Records sent while a slow record holds the only consumer stay with
   * the broker, not in the client's buffer, where nothing would renew them and their locks would
   * run out (before the fix, kafka-clients 4.2+ fetched them with the renewing poll; each came
   * back a second time, and the loop's polls failed). So each is delivered once, after the slow
   * one, and applied once. kafka-clients 4.1 cannot renew, and may have fetched them already:
   * there each is applied once, and a second delivery is a duplicate.
   */
  @Test
  void recordsSentWhileASlowRecordIsRenewedWaitAtTheBrokerAndAreDeliveredOnce() {
    ShareGroups.configure(kafka, group, Map.of("share.record.lock.duration.ms", "3000"));
    kafka.sendAll(List.of(KafkaService.record(topic, 0, "ks", "slow-1", "slow")));
    Queue<Outcome<String>> outcomes = new ConcurrentLinkedQueue<>();
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    AtomicBoolean slowStarted = new AtomicBoolean();
    IdempotentConsumer<String> consumer = consumer((payload,
        tx) -> (payload.equals("slow") && tx.metadata().deliveryAttempt() == 1
            ? Mono.fromRunnable(() -> slowStarted.set(true)).then(Mono.delay(Duration.ofSeconds(9))).then()
            : Mono.<Void>empty())
            .then(Mono.from(recording().handle(payload, tx))).then());
    List<String> quick = new ArrayList<>();
    try (KafkaShareSource<String> source = KafkaShareSource.create(options().meterRegistry(meters).build())) {
      Disposable running = consumer.process(source.receive()).subscribe(outcomes::add);
      try {
        await().atMost(TIMEOUT).untilTrue(slowStarted);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
          quick.add("quick-" + i);
          records.add(KafkaService.record(topic, i % 3, "kq" + i, "quick-" + i, "quick"));
        }
        kafka.sendAll(records);
        await().atMost(TIMEOUT).untilAsserted(() -> assertThat(processedIds(outcomes)).hasSize(7));
        awaitQuiet(outcomes);
      } finally {
        running.dispose();
      }
    }
    assertThat(ShareGroups.leftOver(kafka, group, topic, LEFT_OVER_WINDOW)).isEmpty();
    assertThat(pg.count("SELECT count(*) FROM " + table)).isEqualTo(7);
    assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(7);
    List<Outcome<String>> quickOutcomes = outcomes.stream().filter(o -> quick.contains(o.messageId())).toList();
    assertThat(quickOutcomes).filteredOn(o -> o.status() == Outcome.Status.PROCESSED).as("each quick record applied once, on its"
        + " first delivery").hasSize(6).allSatisfy(o -> assertThat(o.delivery().deliveryAttempt()).isEqualTo(1));
    List<Outcome<String>> slow = outcomes.stream().filter(o -> "slow-1".equals(o.messageId())).toList();
    assertThat(slow).filteredOn(o -> o.status() == Outcome.Status.PROCESSED).hasSize(1);
    if (ShareGroups.clientRenewsLocks()) {
      assertThat(quickOutcomes).as("each quick record delivered once").hasSize(6);
      assertThat(slow).singleElement().satisfies(o -> assertThat(o.delivery().deliveryAttempt()).isEqualTo(1));
      assertThat(meters.counter(KafkaShareSource.RENEWED_LOCKS_METRIC, "idem.source", group).count()).isGreaterThanOrEqualTo(4);
      assertThat(meters.counter(KafkaShareSource.LOST_LOCKS_METRIC, "idem.source", group).count()).isZero();
    } else {
      // kafka-clients 4.1 cannot renew: the lock ran out under the handler, and the copy that came back is a duplicate.
      assertThat(slow).filteredOn(o -> o.status() == Outcome.Status.DUPLICATE).isNotEmpty();
      // A 4.1 client asks for more records each time its buffer is empty while a poll waits; when such a request
      // overtakes the response that carried the slow record, the client goes on fetching in the background, and
      // the quick records lapse in its buffer behind the slow one (3 runs in 12 on kafka-clients 4.1.2). Their
      // copies must be duplicates.
      assertThat(quickOutcomes).filteredOn(o -> o.status() != Outcome.Status.PROCESSED)
          .allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.DUPLICATE));
    }
  }

  @Test
  void aStopReleasesTheRecordsItHeldAndTheNextConsumerAppliesEachOnce() {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      records.add(KafkaService.record(topic, i % 3, "k" + i, "m-" + i, "pay " + i));
    }
    kafka.sendAll(records);
    Queue<Outcome<String>> first = new ConcurrentLinkedQueue<>();
    Set<String> held = ConcurrentHashMap.newKeySet();
    try (KafkaShareSource<String> source = KafkaShareSource.create(options().build())) {
      // A handler that never finishes: every record is held, none settled, when the stop comes.
      Disposable running = consumer((payload, tx) -> Mono.never()).process(source.receive().doOnNext(d -> held.add(d.id())))
          .subscribe(first::add);
      await().atMost(TIMEOUT)
          .untilAsserted(() -> assertThat(pg.count("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'"
              + " AND query LIKE '%" + inbox.table() + "%'")).isPositive());
      running.dispose();
    }
    assertThat(first).isEmpty();
    Queue<Outcome<String>> second = new ConcurrentLinkedQueue<>();
    try (KafkaShareSource<String> source = KafkaShareSource.create(options().build())) {
      Disposable running = consumer(recording()).process(source.receive()).subscribe(second::add);
      try {
        await().atMost(TIMEOUT).untilAsserted(() -> assertThat(processedIds(second)).hasSize(20));
        awaitQuiet(second);
      } finally {
        running.dispose();
      }
    }
    assertThat(ShareGroups.leftOver(kafka, group, topic, LEFT_OVER_WINDOW)).isEmpty();
    assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(20);
    assertThat(pg.count("SELECT count(*) FROM " + table)).isEqualTo(20);
    // What the stopped consumer held came back released (its second delivery). The rest was delivered once, or
    // twice when the stopped client had fetched it into its buffer without handing it over: the broker counts that.
    assertThat(held).isNotEmpty();
    assertThat(second).filteredOn(o -> o.status() == Outcome.Status.PROCESSED).hasSize(20)
        .allSatisfy(o -> assertThat(o.delivery().deliveryAttempt()).isBetween(held.contains(o.messageId()) ? 2 : 1, 2));
  }

  @Test
  void aConsumerThatAsksForKeyOrderFailsAtTheFirstRecordAndTheRecordIsReleasedNotLost() {
    kafka.sendAll(List.of(KafkaService.record(topic, 0, "k1", "ordered-1", "pay 1")));
    AtomicReference<Throwable> failure = new AtomicReference<>();
    try (KafkaShareSource<String> source = KafkaShareSource.create(options().build())) {
      IdempotentConsumer<String> byKey = IdempotentConsumer.<String>named(consumerName).inbox(inbox).handler(recording())
          .ordering(Ordering.BY_KEY).build();
      Disposable running = byKey.process(source.receive()).subscribe(o -> {}, failure::set);
      try {
        await().atMost(TIMEOUT).until(() -> failure.get() != null);
      } finally {
        running.dispose();
      }
    }
    assertThat(failure.get()).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("keeps no order").hasMessageContaining("Ordering.UNORDERED");
    assertThat(pg.count("SELECT count(*) FROM " + table)).isZero();
    Queue<Outcome<String>> settled = new ConcurrentLinkedQueue<>();
    try (KafkaShareSource<String> source = KafkaShareSource.create(options().build())) {
      Disposable running = consumer(recording()).process(source.receive()).subscribe(settled::add);
      try {
        // The outcome comes once the record's acceptance is with the client; a stop before that
        // releases the record (committed in the table, so its next delivery would be a duplicate).
        await().atMost(TIMEOUT)
            .untilAsserted(() -> assertThat(settled).extracting(Outcome::messageId).containsExactly("ordered-1"));
      } finally {
        running.dispose();
      }
    }
    assertThat(pg.column("SELECT message_id FROM " + table)).containsExactly("ordered-1");
    assertThat(ShareGroups.leftOver(kafka, group, topic, LEFT_OVER_WINDOW)).isEmpty();
  }

  /**
   * Waits until no outcome has come for longer than two acquisition locks: a record whose lock ran
   * out while it was processed comes back within one lock and is settled as a duplicate. A stop
   * before that releases it, and the group would rightly still hold it.
   */
  private static void awaitQuiet(Queue<Outcome<String>> outcomes) {
    AtomicInteger seen = new AtomicInteger(-1);
    await().atMost(TIMEOUT).during(LOCK.multipliedBy(2)).pollInterval(Duration.ofMillis(200))
        .until(() -> seen.getAndSet(outcomes.size()) == outcomes.size());
  }

  private static List<String> processedIds(Queue<Outcome<String>> outcomes) {
    return outcomes.stream().filter(o -> o.status() == Outcome.Status.PROCESSED).map(Outcome::messageId).distinct().toList();
  }

  private KafkaSourceOptions.Builder<String> options() {
    return KafkaSourceOptions.<String>builder()
        .bootstrapServers(kafka.bootstrapServers())
        .groupId(group)
        .topics(topic)
        .valueDeserializer(new StrictUtf8Deserializer())
        .prefetch(64)
        .closeTimeout(Duration.ofSeconds(5));
  }

  private IdempotentConsumer<String> consumer(dev.idem.Handler<String> handler) {
    return IdempotentConsumer.<String>named(consumerName)
        .inbox(inbox)
        .handler((payload, tx) -> payload.equals("always-fail")
            ? Mono.error(new IllegalStateException("handler always fails"))
            : handler.handle(payload, tx))
        .retry(RetryPolicy.backoff(3, Duration.ofMillis(10)))
        .ordering(Ordering.UNORDERED)
        .build();
  }

  /** One INSERT for the batch's new messages; a batch holding the failing payload fails whole, and is split until it stands alone. */
  private IdempotentConsumer<String> batchConsumer() {
    return IdempotentConsumer.<String>named(consumerName)
        .inbox(inbox)
        .batchHandler((items, tx) -> {
          if (items.stream().anyMatch(item -> item.payload().equals("always-fail"))) {
            return Mono.error(new IllegalStateException("handler always fails"));
          }
          String[] ids = items.stream().map(BatchItem::messageId).toArray(String[]::new);
          String[] payloads = items.stream().map(BatchItem::payload).toArray(String[]::new);
          return tx.sql("INSERT INTO " + table + " (message_id, payload) SELECT * FROM unnest($1::text[], $2::text[])")
              .bind(0, ids).bind(1, payloads).execute();
        })
        .retry(RetryPolicy.backoff(3, Duration.ofMillis(10)))
        .ordering(Ordering.UNORDERED)
        .build();
  }

  private dev.idem.Handler<String> recording() {
    return (payload, tx) -> tx.sql("INSERT INTO " + table + " (message_id, payload) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, payload).execute();
  }
}
