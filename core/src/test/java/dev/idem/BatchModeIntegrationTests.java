package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** What only batch mode has: shared transactions, set-based handlers, isolation of a bad message. */
class BatchModeIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final RetryPolicy FAST = RetryPolicy.backoff(3, Duration.ofMillis(5))
      .withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(200));

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String accounts;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    accounts = PostgresService.uniqueName("accounts");
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + accounts + " (id bigint PRIMARY KEY, balance bigint NOT NULL)",
        "INSERT INTO " + accounts + " SELECT g, 0 FROM generate_series(1, 10) g",
        "CREATE TABLE " + effects + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, k text)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + effects,
        "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  private record Payment(long account, long amount) {}

  /** The seeds' set-based effect: one UPDATE for the whole batch. */
  private BatchHandler<Payment> creditAll(List<Integer> batchSizes) {
    return (items, tx) -> {
      batchSizes.add(items.size());
      Long[] ids = items.stream().map(i -> i.payload().account()).toArray(Long[]::new);
      Long[] amounts = items.stream().map(i -> i.payload().amount()).toArray(Long[]::new);
      return tx.sql("UPDATE " + accounts + " a SET balance = a.balance + d.amount"
          + " FROM (SELECT account, sum(amount) AS amount FROM unnest($1::bigint[], $2::bigint[]) AS t(account, amount) GROUP BY account) d"
          + " WHERE a.id = d.account")
          .bind(0, ids).bind(1, amounts).execute();
    };
  }

  @Test
  void aSetBasedBatchHandlerAppliesEachDistinctMessageOnceEvenWithRepeatsInsideABatch() {
    List<TestDelivery<Payment>> deliveries = new ArrayList<>();
    for (int i = 0; i < 400; i++) {
      TestDelivery<Payment> d = TestDelivery.of("p-" + i, new Payment(1 + i % 10, 1 + i % 7));
      deliveries.add(d);
      if (i % 5 == 0) {
        deliveries.add(d.redelivered());
      }
    }
    List<Integer> batchSizes = new CopyOnWriteArrayList<>();

    List<Outcome<Payment>> outcomes = IdempotentConsumer.<Payment>named(consumer).inbox(inbox).batchHandler(creditAll(batchSizes))
        .ordering(Ordering.UNORDERED).concurrency(4).prefetch(256).maxBatchSize(64).retry(FAST).build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(deliveries.size());
    assertThat(outcomes.stream().filter(o -> o.status() == Outcome.Status.PROCESSED)).hasSize(400);
    assertThat(outcomes.stream().filter(o -> o.status() == Outcome.Status.DUPLICATE)).hasSize(80);
    for (long account = 1; account <= 10; account++) {
      long expected = 0;
      for (int i = 0; i < 400; i++) {
        if (1 + i % 10 == account) {
          expected += 1 + i % 7;
        }
      }
      assertThat(postgres.count("SELECT balance FROM " + accounts + " WHERE id = $1", account)).as("balance of %d", account)
          .isEqualTo(expected);
    }
    assertThat(batchSizes.stream().mapToInt(Integer::intValue).max().orElse(0)).as("messages shared transactions")
        .isGreaterThan(1);
    assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
  }

  @Test
  void oneBadMessageDoesNotSinkTheBatchAndTheOrderOfItsKeyHolds() {
    List<TestDelivery<Integer>> deliveries = IntStream.range(0, 12).mapToObj(i -> TestDelivery.keyed("m-" + i, "k", i)).toList();
    AtomicInteger calls = new AtomicInteger();
    Handler<Integer> failsOnSeven = (value, tx) -> {
      calls.incrementAndGet();
      return value == 7
          ? Mono.error(new IllegalStateException("seven is bad"))
          : tx.sql("INSERT INTO " + effects + " (message_id, k) VALUES ($1, 'k')").bind(0, tx.messageId()).execute();
    };

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(failsOnSeven)
        .ordering(Ordering.BY_KEY).concurrency(2).prefetch(32).maxBatchSize(32).batchMaxWait(Duration.ofMillis(50)).retry(FAST)
        .build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(o -> o.delivery().id())
        .as("outcomes in delivery order").containsExactlyElementsOf(deliveries.stream().map(TestDelivery::id).toList());
    assertThat(deliveries.get(7).deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(deliveries.get(7).deadLetter().attempts()).as("the batch attempt counts as its first")
        .isEqualTo(FAST.maxAttempts());
    List<Object> expected = new ArrayList<>();
    IntStream.range(0, 12).filter(i -> i != 7).forEach(i -> expected.add("m-" + i));
    assertThat(postgres.column("SELECT message_id FROM " + effects + " ORDER BY seq")).containsExactlyElementsOf(expected);
    assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id = 'm-7'")).isZero();
    assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
  }

  /**
   * One lane holds keys A and B. The first A message fails until every B message has committed,
   * which can only happen when its retries leave the lane to B; the later A message waits for it.
   * With a zero wait the failing message forms a batch of its own; with a wait it shares one.
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(longs = {0, 50})
  void aMessageInRetryBackoffLeavesItsLaneToTheOtherKeysWhileTheLaterMessagesOfItsKeyWait(long batchMaxWaitMillis) {
    List<TestDelivery<String>> deliveries = List.of(TestDelivery.keyed("a-1", "A", "A"), TestDelivery.keyed("b-1", "B", "B"),
        TestDelivery.keyed("b-2", "B", "B"), TestDelivery.keyed("b-3", "B", "B"), TestDelivery.keyed("a-2", "A", "A"),
        TestDelivery.keyed("b-4", "B", "B"), TestDelivery.keyed("b-5", "B", "B"));
    Handler<String> waitsForB = (key, tx) -> {
      Mono<Long> effect = tx.sql("INSERT INTO " + effects + " (message_id, k) VALUES ($1, $2)").bind(0, tx.messageId())
          .bind(1, key).execute();
      if (!tx.messageId().equals("a-1")) {
        return effect;
      }
      return tx.sql("SELECT count(*) FROM " + effects + " WHERE k = 'B'").map(row -> row.get(0, Long.class)).single()
          .flatMap(committedB -> committedB < 5 ? Mono.error(new IllegalStateException("B has not committed yet")) : effect);
    };
    // Enough attempts that a-1 outlasts any pause of the machine; a lane blocked by its retries would exhaust them.
    RetryPolicy patient = new RetryPolicy(10_000, Duration.ofMillis(2), Duration.ofMillis(20), Duration.ofMillis(20),
        Duration.ofMillis(200));

    List<Outcome<String>> outcomes = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(waitsForB)
        .ordering(Ordering.BY_KEY).concurrency(1).prefetch(32).maxBatchSize(32)
        .batchMaxWait(Duration.ofMillis(batchMaxWaitMillis))
        .retry(patient).build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(7).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    Outcome<String> first = outcomes.stream().filter(o -> o.delivery().id().equals("a-1")).findFirst().orElseThrow();
    assertThat(first.attempts()).as("a-1 failed while B was pending").isGreaterThan(1);
    assertThat(postgres.column("SELECT message_id FROM " + effects + " ORDER BY seq"))
        .as("every B before a-1, a-1 before a-2").containsExactly("b-1", "b-2", "b-3", "b-4", "b-5", "a-1", "a-2");
    assertThat(outcomes.stream().map(o -> o.delivery().id()).filter(id -> id.startsWith("a-"))).containsExactly("a-1", "a-2");
    assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
  }

  @Test
  void aFailingSetBasedHandlerIsSplitUntilTheBadMessageIsAloneAndTheOthersCommit() {
    List<TestDelivery<Payment>> deliveries = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      deliveries.add(TestDelivery.of("p-" + i, new Payment(i == 13 ? 999 : 1 + i % 10, 1)));
    }
    BatchHandler<Payment> strict = (items, tx) -> items.stream().anyMatch(i -> i.payload().account() == 999)
        ? Mono.error(new NonRetryableException("unknown account 999"))
        : creditAll(new CopyOnWriteArrayList<>()).handle(items, tx);

    List<Outcome<Payment>> outcomes = IdempotentConsumer.<Payment>named(consumer).inbox(inbox).batchHandler(strict)
        .ordering(Ordering.UNORDERED).concurrency(1).prefetch(64).maxBatchSize(64).batchMaxWait(Duration.ofMillis(50)).retry(FAST)
        .build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(40);
    assertThat(deliveries.get(13).deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
    assertThat(outcomes.stream().filter(o -> o.status() == Outcome.Status.PROCESSED)).hasSize(39);
    assertThat(postgres.count("SELECT sum(balance) FROM " + accounts)).isEqualTo(39);
  }

  /**
   * Thirty good messages and one whose effect writes, then never completes, share a batch with a
   * 1 s transaction timeout. The timeout is the hanging message's, not the database's: the batch
   * splits around it (at it for per-message handlers, by halves for a batch handler), the thirty
   * commit and settle, and the hanging one is retried on its own as in per-message mode
   * (a timeout there is infrastructure: retried, never dead-lettered or acknowledged, logged at
   * WARN), while nothing of it commits.
   */
  @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
  @org.junit.jupiter.params.provider.ValueSource(strings = {"per-message handler", "batch handler"})
  void aHandlerThatNeverCompletesTimesOutAloneWhileTheRestOfItsBatchCommits(String kind) {
    ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory
        .getLogger(IdempotentConsumer.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logs = new ch.qos.logback.core.read.ListAppender<>();
    logs.start();
    logger.addAppender(logs);
    List<TestDelivery<String>> deliveries = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      deliveries.add(TestDelivery.of("g" + i, "good"));
    }
    deliveries.add(17, TestDelivery.of("hangs", "bad"));
    AtomicInteger hangingAttempts = new AtomicInteger();
    java.util.function.BiFunction<String, Tx, Mono<Void>> effect = (id, tx) -> {
      Mono<Void> write = tx.sql("INSERT INTO " + effects + " (message_id, k) VALUES ($1, 'k')").bind(0, id).execute().then();
      if (!id.equals("hangs")) {
        return write;
      }
      hangingAttempts.incrementAndGet();
      return write.then(Mono.never());
    };
    IdempotentConsumer.Builder<String> builder = IdempotentConsumer.<String>named(consumer).inbox(inbox)
        .ordering(Ordering.UNORDERED).concurrency(1).prefetch(64).maxBatchSize(64).batchMaxWait(Duration.ofMillis(100))
        .transactionTimeout(Duration.ofSeconds(1)).retry(FAST);
    IdempotentConsumer<String> idem = kind.equals("batch handler")
        ? builder.batchHandler((items, tx) -> Flux.fromIterable(items).concatMap(i -> effect.apply(i.messageId(), tx)).then())
            .build()
        : builder.handler((payload, tx) -> effect.apply(tx.messageId(), tx)).build();
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    reactor.core.Disposable running = idem.process(Flux.<Delivery<String>>fromIterable(deliveries).concatWith(Flux.never()))
        .subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(30));
      // The hanging message keeps being retried on its own, as in per-message mode.
      int attemptsSoFar = hangingAttempts.get();
      await().atMost(TIMEOUT).until(() -> hangingAttempts.get() > attemptsSoFar);

      assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED))
          .extracting(o -> o.delivery().id()).doesNotContain("hangs");
      TestDelivery<String> hanging = deliveries.get(17);
      assertThat(hanging.ackCount()).isZero();
      assertThat(hanging.deadLetter()).isNull();
      for (TestDelivery<String> d : deliveries) {
        long expected = d == hanging ? 0 : 1;
        assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", d.id()))
            .as("effects of %s", d.id()).isEqualTo(expected);
        assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id = $1", d.id()))
            .as("inbox rows of %s", d.id()).isEqualTo(expected);
        assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(expected);
      }
      assertThat(logs.list).anySatisfy(e -> assertThat(e.getFormattedMessage())
          .contains("did not finish within the transactionTimeout of 1000 ms").contains("it is split"));
      assertThat(logs.list).anySatisfy(e -> {
        assertThat(e.getLevel()).isEqualTo(ch.qos.logback.classic.Level.WARN);
        assertThat(e.getFormattedMessage()).contains("while processing message 'hangs'").contains("TimeoutException");
      });
    } finally {
      running.dispose();
      logger.detachAppender(logs);
    }
  }

  /**
   * Keys a, b, c, ... share one lane and one batch; the handler of a's first message waits until
   * released. Past the slowMessageThreshold it is detached: the rest of the batch commits without
   * it (a's later message waits for it, in order), and it runs again on its own, once released.
   */
  @Test
  void aSlowMessageIsDetachedFromItsBatchWhichCommitsWithoutItWhileItsKeyKeepsItsOrder() {
    ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory
        .getLogger(IdempotentConsumer.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logs = new ch.qos.logback.core.read.ListAppender<>();
    logs.start();
    logger.addAppender(logs);
    List<TestDelivery<String>> deliveries = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      deliveries.add(TestDelivery.keyed("m-" + i, "k" + i, "fast"));
    }
    TestDelivery<String> slow = TestDelivery.keyed("a-1", "a", "slow");
    TestDelivery<String> after = TestDelivery.keyed("a-2", "a", "fast");
    deliveries.add(5, slow);
    deliveries.add(after);
    Sinks.Empty<Void> release = Sinks.empty();
    AtomicInteger slowRuns = new AtomicInteger();
    AtomicInteger retries = new AtomicInteger();
    Handler<String> handler = (payload, tx) -> {
      Mono<Void> write = tx.sql("INSERT INTO " + effects + " (message_id, k) VALUES ($1, 'k')").bind(0, tx.messageId()).execute()
          .then();
      if (!payload.equals("slow")) {
        return write;
      }
      slowRuns.incrementAndGet();
      return write.then(release.asMono());
    };
    IdempotentConsumer<String> idem = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(handler)
        .ordering(Ordering.BY_KEY).concurrency(1).prefetch(64).maxBatchSize(64).batchMaxWait(Duration.ofMillis(100))
        .slowMessageThreshold(Duration.ofMillis(300)).retry(FAST)
        .metrics(new ConsumerMetrics() {
          @Override
          public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
            retries.incrementAndGet();
          }
        }).build();
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    reactor.core.Disposable running = idem.process(Flux.<Delivery<String>>fromIterable(deliveries).concatWith(Flux.never()))
        .subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(20));
      await().atMost(TIMEOUT).until(() -> slowRuns.get() == 2);

      assertThat(outcomes).extracting(o -> o.delivery().id()).doesNotContain("a-1", "a-2");
      assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
      assertThat(slow.ackCount()).isZero();
      assertThat(after.ackCount()).as("a-2 waits for a-1").isZero();
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id IN ('a-1', 'a-2')"))
          .as("the detached attempt rolled back; the second has not committed").isZero();
      assertThat(logs.list).anySatisfy(e -> assertThat(e.getFormattedMessage())
          .contains("the handler of message 'a-1' ran for").contains("past the slowMessageThreshold of 300 ms")
          .contains("it is detached"));

      release.tryEmitEmpty();
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(22));

      assertThat(slowRuns.get()).as("detached once, then run to its end").isEqualTo(2);
      assertThat(retries.get()).as("a detach is not a failure").isZero();
      assertThat(postgres.column("SELECT message_id FROM " + effects + " WHERE message_id LIKE 'a-%' ORDER BY seq"))
          .containsExactly("a-1", "a-2");
      for (TestDelivery<String> d : deliveries) {
        assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", d.id()))
            .as("effects of %s", d.id()).isEqualTo(1);
        assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(1);
        assertThat(d.deadLetter()).isNull();
      }
    } finally {
      running.dispose();
      logger.detachAppender(logs);
    }
  }

  @Test
  void anInfrastructureFailureRetriesTheWholeBatchWithoutSplittingIt() {
    PostgresInbox later = PostgresInbox.create(pool, PostgresService.uniqueName("inbox_later"));
    List<Integer> batchSizes = new CopyOnWriteArrayList<>();
    AtomicInteger infrastructureRetries = new AtomicInteger();
    List<TestDelivery<Payment>> deliveries = IntStream.range(0, 20).mapToObj(i -> TestDelivery.of("p-" + i, new Payment(1, 1)))
        .toList();
    IdempotentConsumer<Payment> idem = IdempotentConsumer.<Payment>named(consumer).inbox(later)
        .batchHandler(creditAll(batchSizes))
        .ordering(Ordering.UNORDERED).concurrency(1).prefetch(20).maxBatchSize(20).batchMaxWait(Duration.ofMillis(100))
        .retry(FAST)
        .metrics(new ConsumerMetrics() {
          @Override
          public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
            if (kind == ErrorKind.INFRASTRUCTURE && infrastructureRetries.incrementAndGet() == 3) {
              later.createSchemaIfAbsent().subscribe();
            }
          }
        }).build();
    try {
      List<Outcome<Payment>> outcomes = idem.process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

      assertThat(outcomes).hasSize(20).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
      assertThat(infrastructureRetries.get()).isGreaterThanOrEqualTo(3);
      assertThat(batchSizes).as("one batch, never split").containsExactly(20);
      assertThat(postgres.count("SELECT balance FROM " + accounts + " WHERE id = 1")).isEqualTo(20);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + later.table());
    }
  }

  @Test
  void atLowLoadABatchStartsAtOnceWithWhatIsThere() {
    List<Integer> batchSizes = new CopyOnWriteArrayList<>();
    IdempotentConsumer<Payment> idem = IdempotentConsumer.<Payment>named(consumer).inbox(inbox)
        .batchHandler(creditAll(batchSizes))
        .maxBatchSize(64).retry(FAST).build();

    for (int i = 0; i < 5; i++) {
      Outcome<Payment> outcome = idem.process(Flux.just(TestDelivery.of("p-" + i, new Payment(2, 1)))).blockLast(TIMEOUT);
      assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    }

    assertThat(batchSizes).containsExactly(1, 1, 1, 1, 1);
    assertThat(postgres.count("SELECT balance FROM " + accounts + " WHERE id = 2")).isEqualTo(5);
  }
}
