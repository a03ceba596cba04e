package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TcpProxy;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The core contract against a real PostgreSQL: one effect per id, ack after commit, bounded and ordered. */
class IdempotentConsumerIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final RetryPolicy FAST_RETRY = RetryPolicy.backoff(3, Duration.ofMillis(10))
      .withInfrastructureBackoff(Duration.ofMillis(50), Duration.ofMillis(500));

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(16);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, k text, v int)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  private Handler<Integer> recordEffect() {
    return (value, tx) -> tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, value).execute();
  }

  /** The micro-batch size these tests run with; {@link BatchedIdempotentConsumerIntegrationTests} runs them batched. */
  int maxBatchSize() {
    return 1;
  }

  private IdempotentConsumer.Builder<Integer> consumer(Handler<Integer> handler) {
    return IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(handler).retry(FAST_RETRY)
        .maxBatchSize(maxBatchSize());
  }

  private long effectCount() {
    return postgres.count("SELECT count(*) FROM " + effects);
  }

  private long effectCount(String messageId) {
    return postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", messageId);
  }

  private long inboxRows(String messageId) {
    return postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE consumer = $1 AND message_id = $2", consumer,
        messageId);
  }

  private static List<Outcome.Status> statuses(List<Outcome<Integer>> outcomes) {
    return outcomes.stream().map(Outcome::status).toList();
  }

  @Test
  void sameIdDeliveredTwiceInSequenceAppliesOneEffectAndAcksBoth() {
    // A broker redelivers a message with its key, so the copy waits for the first on the key's lane.
    TestDelivery<Integer> first = TestDelivery.keyed("m-1", "k-1", 10);
    TestDelivery<Integer> again = first.redelivered();

    List<Outcome<Integer>> outcomes = consumer(recordEffect()).build()
        .process(Flux.just(first, again)).collectList().block(TIMEOUT);

    assertThat(statuses(outcomes)).containsExactly(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE);
    assertThat(outcomes.get(0).delivery()).isSameAs(first);
    assertThat(effectCount("m-1")).isEqualTo(1);
    assertThat(inboxRows("m-1")).isEqualTo(1);
    assertThat(first.ackCount()).isEqualTo(1);
    assertThat(again.ackCount()).isEqualTo(1);
  }

  @Test
  void sameIdWithoutKeyOnTwoLanesAppliesOneEffectAndAcksBoth() {
    // Without a key nothing orders the two copies: they may run on two lanes at once, and either may win.
    TestDelivery<Integer> first = TestDelivery.of("m-1", 10);
    TestDelivery<Integer> again = first.redelivered();

    List<Outcome<Integer>> outcomes = consumer(recordEffect()).build()
        .process(Flux.just(first, again)).collectList().block(TIMEOUT);

    assertThat(statuses(outcomes)).containsExactlyInAnyOrder(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE);
    assertThat(effectCount("m-1")).isEqualTo(1);
    assertThat(inboxRows("m-1")).isEqualTo(1);
    assertThat(first.ackCount()).isEqualTo(1);
    assertThat(again.ackCount()).isEqualTo(1);
  }

  @Test
  void sameIdsOnTwoConcurrentConsumerInstancesApplyOneEffectEach() {
    int n = 300;
    List<TestDelivery<Integer>> forA = new ArrayList<>();
    List<TestDelivery<Integer>> forB = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      forA.add(TestDelivery.of("m-" + i, i));
      forB.add(TestDelivery.of("m-" + i, i));
    }
    // The handler lingers inside its transaction so that the two instances really overlap on ids.
    Handler<Integer> slowEffect = (value, tx) -> Mono.delay(Duration.ofMillis(2))
        .then(tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, value)
            .execute());
    IdempotentConsumer<Integer> a = consumer(slowEffect).ordering(Ordering.UNORDERED).concurrency(6).build();
    IdempotentConsumer<Integer> b = consumer(slowEffect).ordering(Ordering.UNORDERED).concurrency(6).build();

    List<Outcome<Integer>> outcomes = Flux.merge(a.process(Flux.fromIterable(forA)), b.process(Flux.fromIterable(forB)))
        .collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(2 * n);
    Map<Outcome.Status, Long> byStatus = outcomes.stream().collect(Collectors.groupingBy(Outcome::status, Collectors.counting()));
    assertThat(byStatus).containsEntry(Outcome.Status.PROCESSED, (long) n).containsEntry(Outcome.Status.DUPLICATE, (long) n);
    assertThat(effectCount()).isEqualTo(n);
    assertThat(postgres.count("SELECT count(DISTINCT message_id) FROM " + effects)).isEqualTo(n);
    assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE consumer = $1", consumer)).isEqualTo(n);
    assertThat(forA).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
    assertThat(forB).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
  }

  @Test
  void handlerFailingOnceLeavesNothingThenRetrySucceedsWithOneEffect() {
    AtomicInteger attempts = new AtomicInteger();
    List<Long> committedSeenOnSecondAttempt = new CopyOnWriteArrayList<>();
    Handler<Integer> failOnce = (value, tx) -> {
      int attempt = attempts.incrementAndGet();
      Mono<Long> insert = tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId())
          .bind(1, value).execute();
      if (attempt == 1) {
        return insert.then(Mono.error(new IllegalStateException("transient failure")));
      }
      // What another session sees now is what attempt 1 left behind after its rollback.
      return Mono.fromCallable(() -> effectCount("m-1") + inboxRows("m-1"))
          .subscribeOn(reactor.core.scheduler.Schedulers.boundedElastic())
          .doOnNext(committedSeenOnSecondAttempt::add)
          .then(insert);
    };

    List<Outcome<Integer>> outcomes = consumer(failOnce).build().process(Flux.just(TestDelivery.of("m-1", 1))).collectList()
        .block(TIMEOUT);

    assertThat(committedSeenOnSecondAttempt).containsExactly(0L);
    assertThat(statuses(outcomes)).containsExactly(Outcome.Status.PROCESSED);
    assertThat(outcomes.get(0).attempts()).isEqualTo(2);
    assertThat(effectCount("m-1")).isEqualTo(1);
    assertThat(inboxRows("m-1")).isEqualTo(1);
  }

  @Test
  void crashBetweenCommitAndAckMakesTheRedeliveryADuplicate() {
    TestDelivery<Integer> original = TestDelivery.of("m-1", 5);
    TestDelivery<Integer> crashed = original.withLostAck();
    IdempotentConsumer<Integer> idem = consumer(recordEffect()).build();

    List<Outcome<Integer>> firstRun = idem.process(Flux.just(crashed)).collectList().block(TIMEOUT);
    assertThat(firstRun).as("no outcome for a message whose ack was lost").isEmpty();
    assertThat(crashed.ackCount()).isZero();
    assertThat(effectCount("m-1")).isEqualTo(1);

    TestDelivery<Integer> redelivery = original.redelivered();
    List<Outcome<Integer>> secondRun = idem.process(Flux.just(redelivery)).collectList().block(TIMEOUT);

    assertThat(statuses(secondRun)).containsExactly(Outcome.Status.DUPLICATE);
    assertThat(redelivery.ackCount()).isEqualTo(1);
    assertThat(effectCount("m-1")).isEqualTo(1);
  }

  @Test
  void failedTransactionLeavesNoRowSoARedeliverySucceeds() {
    Handler<Integer> broken = (value, tx) -> tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, value).execute().then(Mono.error(new IllegalStateException("bug in handler")));
    TestDelivery<Integer> first = TestDelivery.of("m-1", 7);

    List<Outcome<Integer>> failed = consumer(broken).retry(RetryPolicy.backoff(2, Duration.ofMillis(5))).build()
        .process(Flux.just(first)).collectList().block(TIMEOUT);

    assertThat(statuses(failed)).containsExactly(Outcome.Status.DEAD_LETTERED);
    assertThat(first.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(first.deadLetter().attempts()).isEqualTo(2);
    assertThat(first.deadLetter().errorMessage()).isEqualTo("bug in handler");
    assertThat(effectCount("m-1")).isZero();
    assertThat(inboxRows("m-1")).isZero();

    TestDelivery<Integer> redelivered = first.redelivered();
    List<Outcome<Integer>> fixed = consumer(recordEffect()).build().process(Flux.just(redelivered)).collectList().block(TIMEOUT);

    assertThat(statuses(fixed)).containsExactly(Outcome.Status.PROCESSED);
    assertThat(effectCount("m-1")).isEqualTo(1);
    assertThat(redelivered.ackCount()).isEqualTo(1);
  }

  @Test
  void databaseGoingAwayMidStreamDeadLettersNothingAcksNothingUnprocessedAndRecovers() {
    int n = 300;
    try (TcpProxy proxy = new TcpProxy(postgres.host(), postgres.port())) {
      ConnectionPool viaProxy = PostgresConnections.pool(postgres.urlVia("127.0.0.1", proxy.port()), 8);
      try {
        PostgresInbox proxiedInbox = PostgresInbox.create(viaProxy, inbox.table());
        AtomicLong infrastructureRetries = new AtomicLong();
        ConsumerMetrics countRetries = new ConsumerMetrics() {
          @Override
          public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
            if (kind == ErrorKind.INFRASTRUCTURE) {
              infrastructureRetries.incrementAndGet();
            }
          }
        };
        List<TestDelivery<Integer>> deliveries = IntStream.range(0, n).mapToObj(i -> TestDelivery.of("m-" + i, i)).toList();
        Handler<Integer> slowEffect = (value, tx) -> Mono.delay(Duration.ofMillis(3))
            .then(tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, value)
                .execute());
        IdempotentConsumer<Integer> idem = IdempotentConsumer.<Integer>named(consumer).inbox(proxiedInbox).handler(slowEffect)
            .retry(FAST_RETRY).maxBatchSize(maxBatchSize()).concurrency(4).ordering(Ordering.UNORDERED).metrics(countRetries)
            .build();

        List<Outcome<Integer>> outcomes = new CopyOnWriteArrayList<>();
        Disposable running = idem.process(Flux.fromIterable(deliveries)).subscribe(outcomes::add);
        try {
          await().atMost(TIMEOUT).until(() -> outcomes.size() >= 50);
          proxy.cut();
          await().atMost(TIMEOUT).until(() -> infrastructureRetries.get() >= 10);
          int settledWhileDown = outcomes.size();
          long ackedWhileDown = deliveries.stream().filter(d -> d.ackCount() > 0).count();
          assertThat(ackedWhileDown).isEqualTo(settledWhileDown);
          proxy.restore();
          await().atMost(TIMEOUT).until(() -> outcomes.size() == n);
        } finally {
          running.dispose();
        }

        assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isNotEqualTo(Outcome.Status.DEAD_LETTERED));
        assertThat(deliveries).allSatisfy(d -> {
          assertThat(d.deadLetter()).isNull();
          assertThat(d.ackCount()).isEqualTo(1);
        });
        assertThat(effectCount()).isEqualTo(n);
        assertThat(postgres.count("SELECT count(DISTINCT message_id) FROM " + effects)).isEqualTo(n);
      } finally {
        viaProxy.dispose();
      }
    }
  }

  @Test
  void byKeyKeepsDeliveryOrderPerKeyAndNeverOverlapsAKey() {
    int perKey = 60;
    List<String> keys = List.of("a", "b", "c", "d");
    List<TestDelivery<Integer>> deliveries = new ArrayList<>();
    for (int i = 0; i < perKey; i++) {
      for (String key : keys) {
        deliveries.add(TestDelivery.keyed(key + "-" + i, key, i));
      }
    }
    Map<String, AtomicInteger> inFlightPerKey = new ConcurrentHashMap<>();
    AtomicInteger maxPerKey = new AtomicInteger();
    AtomicInteger inFlight = new AtomicInteger();
    AtomicInteger maxInFlight = new AtomicInteger();
    Handler<Integer> recordKeyed = (value, tx) -> {
      String key = tx.messageId().substring(0, 1);
      return Mono.defer(() -> {
        maxPerKey.accumulateAndGet(inFlightPerKey.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet(), Math::max);
        maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
        return Mono.delay(Duration.ofMillis(ThreadLocalRandom.current().nextInt(1, 6)));
      })
          .then(tx.sql("INSERT INTO " + effects + " (message_id, k, v) VALUES ($1, $2, $3)")
              .bind(0, tx.messageId()).bind(1, key).bind(2, value).execute())
          // Counted out when the handler's publisher terminates, before its signal travels on:
          // in batch mode the next handler of the batch starts within that signal.
          .doOnTerminate(() -> {
            inFlightPerKey.get(key).decrementAndGet();
            inFlight.decrementAndGet();
          });
    };

    List<Outcome<Integer>> outcomes = consumer(recordKeyed).ordering(Ordering.BY_KEY).concurrency(8).build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(deliveries.size()).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    assertThat(maxPerKey.get()).as("messages of one key in flight at once").isEqualTo(1);
    assertThat(maxInFlight.get()).as("different keys ran in parallel").isGreaterThan(1);
    List<Integer> expected = IntStream.range(0, perKey).boxed().toList();
    for (String key : keys) {
      List<Object> order = postgres.column("SELECT v FROM " + effects + " WHERE k = $1 ORDER BY seq", key);
      assertThat(order).as("effect order of key %s", key).isEqualTo(new ArrayList<Object>(expected));
    }
  }

  @Test
  void inFlightNeverExceedsConcurrency() {
    int concurrency = 4;
    AtomicInteger inFlight = new AtomicInteger();
    AtomicInteger max = new AtomicInteger();
    Handler<Integer> counting = (value, tx) -> Mono.defer(() -> {
      max.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
      return Mono.delay(Duration.ofMillis(4));
    })
        .then(tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, value)
            .execute())
        .doOnTerminate(inFlight::decrementAndGet);
    Flux<TestDelivery<Integer>> source = Flux.range(0, 200).map(i -> TestDelivery.of("m-" + i, i));

    List<Outcome<Integer>> outcomes = consumer(counting).ordering(Ordering.UNORDERED).concurrency(concurrency).prefetch(16)
        .build()
        .process(source).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(200);
    assertThat(max.get()).isLessThanOrEqualTo(concurrency).isEqualTo(concurrency);
    assertThat(effectCount()).isEqualTo(200);
  }

  @Test
  void demandOnTheSourceStaysWithinPrefetchPlusConcurrencyWhileTheHandlerIsStuck() {
    Sinks.Empty<Void> gate = Sinks.empty();
    AtomicLong requested = new AtomicLong();
    AtomicInteger started = new AtomicInteger();
    Handler<Integer> stuck = (value, tx) -> Mono.fromRunnable(started::incrementAndGet).then(gate.asMono())
        .then(tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, value)
            .execute());
    Flux<TestDelivery<Integer>> backlog = Flux.range(0, 10_000).map(i -> TestDelivery.of("m-" + i, i))
        .doOnRequest(r -> requested.addAndGet(Math.min(r, 1_000_000)));

    List<Outcome<Integer>> outcomes = new CopyOnWriteArrayList<>();
    Disposable running = consumer(stuck).ordering(Ordering.UNORDERED).concurrency(3).prefetch(5).build()
        .process(backlog).subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).until(() -> started.get() == 3);
      assertThat(requested.get()).isLessThanOrEqualTo(3 + 5);
      assertThat(outcomes).isEmpty();
      assertThat(effectCount()).isZero();
    } finally {
      running.dispose();
    }
  }

  @Test
  void badInputIsDeadLetteredWithItsReasonAndTheStreamGoesOn() {
    TestDelivery<Integer> nullId = TestDelivery.of(null, 1);
    TestDelivery<Integer> blankId = TestDelivery.of("  ", 2);
    TestDelivery<Integer> longId = TestDelivery.of("x".repeat(300), 3);
    TestDelivery<Integer> nullPayload = TestDelivery.of("no-payload", null);
    TestDelivery<Integer> undecodable = TestDelivery.undecodable("poison", new IllegalArgumentException("not JSON: '{oops'"));
    TestDelivery<Integer> rejected = TestDelivery.of("rejected", -1);
    TestDelivery<Integer> alwaysFails = TestDelivery.of("always-fails", -2);
    TestDelivery<Integer> good = TestDelivery.of("good", 42);
    AtomicInteger handlerCalls = new AtomicInteger();
    Handler<Integer> handler = (value, tx) -> {
      handlerCalls.incrementAndGet();
      if (value == -1) {
        return Mono.error(new NonRetryableException("amount must not be negative"));
      }
      if (value == -2) {
        return Mono.error(new IllegalStateException("downstream says no"));
      }
      return recordEffect().handle(value, tx);
    };

    List<Outcome<Integer>> outcomes = consumer(handler).ordering(Ordering.UNORDERED).concurrency(1).build()
        .process(Flux.just(nullId, blankId, longId, nullPayload, undecodable, rejected, alwaysFails, good))
        .collectList().block(TIMEOUT);

    // UNORDERED: in batch mode the good message need not wait while always-fails is retried off its lane.
    assertThat(statuses(outcomes)).containsExactlyInAnyOrder(
        Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED,
        Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.PROCESSED);
    assertThat(nullId.deadLetter().reason()).isEqualTo(DeadLetterReason.MISSING_ID);
    assertThat(nullId.deadLetter().detail()).contains("id is null");
    assertThat(blankId.deadLetter().reason()).isEqualTo(DeadLetterReason.MISSING_ID);
    assertThat(longId.deadLetter().reason()).isEqualTo(DeadLetterReason.INVALID_ID);
    assertThat(longId.deadLetter().detail()).contains("300 characters");
    assertThat(nullPayload.deadLetter().reason()).isEqualTo(DeadLetterReason.MISSING_PAYLOAD);
    assertThat(undecodable.deadLetter().reason()).isEqualTo(DeadLetterReason.UNDECODABLE_PAYLOAD);
    assertThat(undecodable.deadLetter().errorMessage()).isEqualTo("not JSON: '{oops'");
    assertThat(rejected.deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
    assertThat(rejected.deadLetter().attempts()).isEqualTo(1);
    assertThat(rejected.deadLetter().errorClass()).isEqualTo(NonRetryableException.class.getName());
    assertThat(alwaysFails.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(alwaysFails.deadLetter().attempts()).isEqualTo(FAST_RETRY.maxAttempts());
    assertThat(List.of(nullId, blankId, longId, nullPayload, undecodable, rejected, alwaysFails, good))
        .allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
    assertThat(handlerCalls.get()).as("bad input never reaches the handler").isEqualTo(1 + FAST_RETRY.maxAttempts() + 1);
    assertThat(effectCount()).isEqualTo(1);
    assertThat(effectCount("good")).isEqualTo(1);
    assertThat(postgres.count("SELECT count(*) FROM " + inbox.table())).as("only the good id is recorded").isEqualTo(1);
  }

  @Test
  void cancellingMidTransactionRollsBackAndLeavesTheMessageUnackedForRedelivery() {
    Sinks.Empty<Void> never = Sinks.empty();
    AtomicInteger started = new AtomicInteger();
    Handler<Integer> hangs = (value, tx) -> tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, value).execute()
        .doOnNext(rows -> started.incrementAndGet())
        .then(never.asMono());
    TestDelivery<Integer> delivery = TestDelivery.of("m-1", 1);

    Disposable running = consumer(hangs).build().process(Flux.just(delivery)).subscribe();
    await().atMost(TIMEOUT).until(() -> started.get() == 1);
    running.dispose();

    await().atMost(TIMEOUT).untilAsserted(() -> {
      assertThat(inboxRows("m-1")).isZero();
      assertThat(postgres
          .count("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE '%" + effects + "%'"))
          .isZero();
    });
    assertThat(delivery.ackCount()).isZero();
    assertThat(effectCount()).isZero();

    TestDelivery<Integer> redelivery = delivery.redelivered();
    List<Outcome<Integer>> outcomes = consumer(recordEffect()).build().process(Flux.just(redelivery)).collectList()
        .block(TIMEOUT);
    assertThat(statuses(outcomes)).containsExactly(Outcome.Status.PROCESSED);
    assertThat(effectCount("m-1")).isEqualTo(1);
  }

  @Test
  void twoConsumerNamesKeepSeparateDedupHistories() {
    TestDelivery<Integer> forFirst = TestDelivery.of("shared-id", 1);
    TestDelivery<Integer> forSecond = TestDelivery.of("shared-id", 1);
    String otherName = consumer + "_other";

    consumer(recordEffect()).build().process(Flux.just(forFirst)).blockLast(TIMEOUT);
    Outcome<Integer> second = IdempotentConsumer.<Integer>named(otherName).inbox(inbox).handler(recordEffect())
        .maxBatchSize(maxBatchSize()).build()
        .process(Flux.just(forSecond)).blockLast(TIMEOUT);

    assertThat(second.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(effectCount("shared-id")).isEqualTo(2);
  }

  @Test
  void schemaCreationIsRepeatableAndRetentionPurgesOnlyOldIds() {
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    postgres.execute(
        "INSERT INTO " + inbox.table()
            + " (consumer, message_id, processed_at) SELECT 'c', 'old-' || g, now() - interval '10 days' FROM generate_series(1, 12000) g",
        "INSERT INTO " + inbox.table() + " (consumer, message_id) VALUES ('c', 'fresh')");

    Long purged = inbox.purgeOlderThan(Duration.ofDays(7)).block(TIMEOUT);

    assertThat(purged).isEqualTo(12000);
    assertThat(postgres.column("SELECT message_id FROM " + inbox.table())).containsExactly("fresh");
  }

  @Test
  void emptyHandlerResultStillCommits() {
    Handler<Integer> noEffect = (value, tx) -> Mono.empty();
    Outcome<Integer> outcome = consumer(noEffect).build().process(Flux.just(TestDelivery.of("m-1", 1))).blockLast(TIMEOUT);
    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(inboxRows("m-1")).isEqualTo(1);
    assertThat(Collections.frequency(List.of(outcome.status()), Outcome.Status.PROCESSED)).isEqualTo(1);
  }

  @Test
  void aCustomErrorClassifierDeadLettersItsNonRetryableErrorAtOnceAndLeavesTheRestToTheDefaults() {
    // "declined" is the user's permanent failure; "flaky" is left to the default rules (retryable, 3 attempts here).
    Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    Handler<Integer> handler = (value, tx) -> {
      calls.computeIfAbsent(tx.messageId(), id -> new AtomicInteger()).incrementAndGet();
      if (value < 0) {
        return Mono.error(new IllegalStateException(value == -1 ? "card declined" : "flaky"));
      }
      return recordEffect().handle(value, tx);
    };
    ErrorClassifier declined = error -> error.getMessage() != null && error.getMessage().contains("declined")
        ? ErrorKind.NON_RETRYABLE
        : null;
    TestDelivery<Integer> refused = TestDelivery.keyed("m-declined", "k-1", -1);
    TestDelivery<Integer> flaky = TestDelivery.keyed("m-flaky", "k-2", -2);
    TestDelivery<Integer> fine = TestDelivery.keyed("m-fine", "k-3", 3);

    List<Outcome<Integer>> outcomes = consumer(handler).errorClassifier(declined).build()
        .process(Flux.just(refused, flaky, fine)).collectList().block(TIMEOUT);

    Map<String, Outcome.Status> byId = outcomes.stream()
        .collect(Collectors.toMap(Outcome::messageId, Outcome::status));
    assertThat(byId).containsEntry("m-declined", Outcome.Status.DEAD_LETTERED)
        .containsEntry("m-flaky", Outcome.Status.DEAD_LETTERED)
        .containsEntry("m-fine", Outcome.Status.PROCESSED);
    assertThat(refused.deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
    assertThat(refused.deadLetter().attempts()).isEqualTo(1);
    assertThat(refused.deadLetter().errorMessage()).isEqualTo("card declined");
    assertThat(flaky.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(flaky.deadLetter().attempts()).isEqualTo(FAST_RETRY.maxAttempts());
    // In a batch the first run of a failing message is the batch's; the attempts above are the message's own.
    assertThat(calls.get("m-flaky").get()).isGreaterThan(calls.get("m-declined").get());
    assertThat(effectCount()).isEqualTo(1);
    assertThat(effectCount("m-fine")).isEqualTo(1);
  }
}
