package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TcpProxy;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Issue 8's failure paths on a real PostgreSQL: a transaction timeout or a stalled network never
 * loses a message, swallowed SQL errors and contention are classified as the message's, JVM
 * errors of the handler stop the stream, failed settlements end, malformed ids are rejected, log
 * lines stay bounded.
 */
class FailurePathsIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(90);
  private static final RetryPolicy FAST = RetryPolicy.backoff(3, Duration.ofMillis(5))
      .withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(200));

  private final PostgresService postgres = PostgresService.get();
  private final List<ConnectionPool> pools = new java.util.ArrayList<>();
  private PostgresInbox inbox;
  private String effects;
  private String consumer;
  private ListAppender<ILoggingEvent> logs;

  @BeforeEach
  void setUp() {
    ConnectionPool pool = pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL)");
    logs = new ListAppender<>();
    logs.start();
    ((Logger) LoggerFactory.getLogger(IdempotentConsumer.class)).addAppender(logs);
  }

  @AfterEach
  void tearDown() {
    ((Logger) LoggerFactory.getLogger(IdempotentConsumer.class)).detachAppender(logs);
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pools.forEach(ConnectionPool::dispose);
  }

  private ConnectionPool pool(int size) {
    ConnectionPool pool = postgres.pool(size);
    pools.add(pool);
    return pool;
  }

  private Mono<Long> insertEffect(Tx tx) {
    return tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute();
  }

  private long effects(String id) {
    return postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", id);
  }

  private long inboxRows(String id) {
    return postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE consumer = $1 AND message_id = $2", consumer, id);
  }

  private IdempotentConsumer.Builder<String> consumer(PostgresInbox on, Handler<String> handler) {
    return IdempotentConsumer.<String>named(consumer).inbox(on).handler(handler).retry(FAST);
  }

  private List<ILoggingEvent> logged(Level level, String fragment) {
    return logs.list.stream().filter(e -> e.getLevel() == level && e.getFormattedMessage().contains(fragment)).toList();
  }

  // --- 2. a transaction timeout can lose a message -------------------------------------------

  /**
   * The reported scenario: pool of 1, transactionTimeout 6 s, a handler that inserts its effect
   * and then sleeps 20 s on its first attempt. With the server-side guards off only the
   * client's cleanup (cancel request, rollback, discard) stands between the next attempt and a
   * connection still inside the old transaction.
   */
  @Test
  void aStatementSlowerThanTheTransactionTimeoutOnAPoolOfOneLosesNoMessageWithoutServerGuards() {
    slowStatementScenario(ServerTimeouts.none());
  }

  /** The same with the default guards: the server's statement_timeout stops the sleep first. */
  @Test
  void aStatementSlowerThanTheTransactionTimeoutOnAPoolOfOneLosesNoMessageWithDefaultServerGuards() {
    slowStatementScenario(ServerTimeouts.derivedFrom(Duration.ofSeconds(6)));
  }

  private void slowStatementScenario(ServerTimeouts guards) {
    PostgresInbox onePool = PostgresInbox.create(pool(1), inbox.table());
    Map<String, AtomicInteger> attempts = new ConcurrentHashMap<>();
    Handler<String> slowOnce = (p, tx) -> insertEffect(tx).then(
        attempts.computeIfAbsent(tx.messageId(), k -> new AtomicInteger()).incrementAndGet() == 1 && tx.messageId().equals("m-1")
            ? tx.sql("SELECT pg_sleep(20)").execute().then()
            : Mono.empty());
    List<TestDelivery<String>> deliveries = List.of(TestDelivery.of("m-1", "a"), TestDelivery.of("m-2", "b"),
        TestDelivery.of("m-3", "c"));

    List<Outcome<String>> outcomes = consumer(onePool, slowOnce).concurrency(1).ordering(Ordering.UNORDERED)
        .transactionTimeout(Duration.ofSeconds(6)).serverTimeouts(guards).build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::status).containsOnly(Outcome.Status.PROCESSED).hasSize(3);
    for (String id : List.of("m-1", "m-2", "m-3")) {
      assertThat(effects(id)).as("effects of " + id).isEqualTo(1);
      assertThat(inboxRows(id)).as("inbox rows of " + id).isEqualTo(1);
    }
    assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
  }

  /**
   * A network that goes silent mid-transaction without a reset: the attempt times out, its
   * connection is discarded, processing waits while the network is silent and resumes after;
   * every message ends with exactly one effect.
   */
  @Test
  void aNetworkStallThatKeepsTheSocketOpenEndsWithOneEffectPerMessage() {
    try (TcpProxy proxy = new TcpProxy(postgres.host(), postgres.port())) {
      ConnectionPool viaProxy = PostgresConnections.pool(postgres.urlVia("127.0.0.1", proxy.port()), 2);
      pools.add(viaProxy);
      PostgresInbox proxied = PostgresInbox.create(viaProxy, inbox.table());
      AtomicInteger stalls = new AtomicInteger();
      AtomicLong infrastructureRetries = new AtomicLong();
      Handler<String> stallsOnce = (p, tx) -> insertEffect(tx).doOnSuccess(n -> {
        if (tx.messageId().equals("m-2") && stalls.getAndIncrement() == 0) {
          proxy.stall();
        }
      });
      List<TestDelivery<String>> deliveries = java.util.stream.IntStream.range(0, 6).mapToObj(i -> TestDelivery.of("m-" + i, "x"))
          .toList();
      List<Outcome<String>> outcomes = new java.util.concurrent.CopyOnWriteArrayList<>();
      Disposable running = consumer(proxied, stallsOnce).concurrency(2).ordering(Ordering.UNORDERED)
          .transactionTimeout(Duration.ofSeconds(2))
          .metrics(new ConsumerMetrics() {
            @Override
            public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
              if (kind == ErrorKind.INFRASTRUCTURE) {
                infrastructureRetries.incrementAndGet();
              }
            }
          })
          .build().process(Flux.fromIterable(deliveries)).subscribe(outcomes::add);
      try {
        await().atMost(TIMEOUT).until(() -> infrastructureRetries.get() >= 2);
        assertThat(deliveries.get(2).ackCount()).as("not acknowledged while the network is silent").isZero();
        proxy.resume();
        await().atMost(TIMEOUT).until(() -> outcomes.size() == deliveries.size());
      } finally {
        running.dispose();
      }
      // A COMMIT held by the silent network may still reach the server after it resumes; the
      // retry then finds the dedup row and settles the message as a duplicate: still one effect.
      assertThat(outcomes).extracting(Outcome::status).isSubsetOf(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE);
      for (TestDelivery<String> d : deliveries) {
        assertThat(effects(d.id())).as("effects of " + d.id()).isEqualTo(1);
        assertThat(d.ackCount()).isEqualTo(1);
      }
    }
  }

  // --- 3. failure paths that never end, silently ---------------------------------------------

  @Test
  void aMessageTheBrokerDeliveredMaxAttemptsTimesIsDeadLetteredAtItsFirstRetryableFailureNotRetriedInMemoryAgain() {
    AtomicInteger runs = new AtomicInteger();
    Handler<String> fails = (p, tx) -> {
      runs.incrementAndGet();
      return Mono.error(new IllegalStateException("downstream refuses " + p));
    };
    // Delivered twice before (a crash, an expired lock): a third delivery still gets its retries in memory.
    TestDelivery<String> early = TestDelivery.of("early", "x").deliveredTimes(2);
    assertThat(consumer(inbox, fails).build().process(Flux.just(early)).blockLast(TIMEOUT).status())
        .isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(runs.get()).isEqualTo(3);
    assertThat(early.deadLetter().attempts()).isEqualTo(3);

    runs.set(0);
    TestDelivery<String> late = TestDelivery.of("late", "x").deliveredTimes(3);
    Outcome<String> outcome = consumer(inbox, fails).build().process(Flux.just(late)).blockLast(TIMEOUT);
    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(runs.get()).isEqualTo(1);
    assertThat(late.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(late.deadLetter().attempts()).isEqualTo(1);
    assertThat(logs.list).anySatisfy(e -> assertThat(e.getFormattedMessage())
        .contains("message 'late' failed on its delivery 3 by the broker, which is maxAttempts (3) or more"));
    assertThat(effects("late")).isZero();
  }

  @Test
  void aHandlerThatSwallowsAnSqlErrorFailsTheMessageWhichIsRetriedThenDeadLetteredNotRetriedAsInfrastructure() {
    AtomicLong infrastructureRetries = new AtomicLong();
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    Handler<String> swallows = (p, tx) -> insertEffect(tx)
        .then(tx.sql("SELECT 1 / 0").execute().onErrorResume(e -> Mono.empty()));

    Outcome<String> outcome = consumer(inbox, swallows).metrics(new ConsumerMetrics() {
      @Override
      public void retrying(Delivery<?> d, Throwable error, ErrorKind kind) {
        if (kind == ErrorKind.INFRASTRUCTURE) {
          infrastructureRetries.incrementAndGet();
        }
      }
    }).build().process(Flux.just(delivery)).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(delivery.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(delivery.deadLetter().attempts()).isEqualTo(3);
    assertThat(delivery.deadLetter().detail()).contains("ROLLBACK");
    assertThat(infrastructureRetries.get()).isZero();
    assertThat(effects("m-1")).isZero();
    assertThat(inboxRows("m-1")).isZero();
  }

  @Test
  void deadlocksAndSerializationFailuresAreRetriedWithoutSpendingTheMessagesAttempts() {
    AtomicInteger calls = new AtomicInteger();
    // Real PostgreSQL errors with those SQLSTATEs, five in a row, then success.
    Handler<String> contended = (p, tx) -> calls.incrementAndGet() <= 5
        ? tx.sql("DO $$ BEGIN RAISE EXCEPTION 'contended' USING ERRCODE = '" + (calls.get() % 2 == 0 ? "40P01" : "40001")
            + "'; END $$")
            .execute()
        : insertEffect(tx);

    Outcome<String> outcome = consumer(inbox, contended).retry(RetryPolicy.backoff(2, Duration.ofMillis(5)))
        .build().process(Flux.just(TestDelivery.of("m-1", "x"))).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(outcome.attempts()).isEqualTo(6);
    assertThat(effects("m-1")).isEqualTo(1);
  }

  @Test
  void contentionThatNeverEndsIsBoundedAndEndsInADeadLetter() {
    AtomicInteger calls = new AtomicInteger();
    Handler<String> alwaysContended = (p, tx) -> {
      calls.incrementAndGet();
      return tx.sql("DO $$ BEGIN RAISE EXCEPTION 'contended' USING ERRCODE = '40001'; END $$").execute();
    };
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");

    Outcome<String> outcome = consumer(inbox, alwaysContended)
        .retry(RetryPolicy.backoff(2, Duration.ofMillis(5)).withMaxContentionRetries(3))
        .build().process(Flux.just(delivery)).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(delivery.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(calls.get()).as("3 free contention retries, then 2 counted attempts").isEqualTo(5);
  }

  /** A primary switch fails every message in flight at once: the outage is one WARN, the other messages log at DEBUG. */
  @Test
  void anOutageThatFailsEveryMessageInFlightIsLoggedOnceAtWarnPerConsumer() {
    java.util.Map<String, AtomicInteger> calls = new java.util.concurrent.ConcurrentHashMap<>();
    Handler<String> connectionLost = (p, tx) -> {
      calls.computeIfAbsent(tx.messageId(), id -> new AtomicInteger()).incrementAndGet();
      return Mono.error(new io.r2dbc.spi.R2dbcNonTransientResourceException("test: connection lost"));
    };
    List<TestDelivery<String>> deliveries = java.util.stream.IntStream.range(0, 4).mapToObj(i -> TestDelivery.of("m-" + i, "x"))
        .toList();
    Disposable running = consumer(inbox, connectionLost).concurrency(4).maxBatchSize(1)
        .build().process(Flux.fromIterable(deliveries)).subscribe();
    try {
      await().atMost(TIMEOUT).until(() -> calls.size() == 4 && calls.values().stream().allMatch(n -> n.get() >= 3));
    } finally {
      running.dispose();
    }
    assertThat(logged(Level.WARN, "infrastructure unavailable while processing message")).hasSize(1);
    assertThat(deliveries).allSatisfy(d -> {
      assertThat(d.ackCount()).isZero();
      assertThat(d.deadLetter()).isNull();
    });
  }

  @Test
  void aMessageStuckOnInfrastructureIsLoggedAtWarnPeriodicallyWithItsAge() {
    PostgresInbox missingTable = PostgresInbox.create(inbox.connectionFactory(), PostgresService.uniqueName("inbox_missing"));
    TestDelivery<String> delivery = TestDelivery.of("m-stuck", "x");
    Disposable running = consumer(missingTable, (p, tx) -> insertEffect(tx)).stuckWarningInterval(Duration.ofMillis(300))
        .build().process(Flux.just(delivery)).subscribe();
    try {
      await().atMost(TIMEOUT).until(() -> logged(Level.WARN, "has been waiting for infrastructure for").size() >= 2);
    } finally {
      running.dispose();
    }
    assertThat(logged(Level.WARN, "infrastructure unavailable while processing message 'm-stuck'")).hasSize(1);
    assertThat(logged(Level.WARN, "message 'm-stuck' has been waiting for infrastructure")).hasSizeGreaterThanOrEqualTo(2);
    assertThat(delivery.ackCount()).isZero();
    assertThat(delivery.deadLetter()).isNull();
  }

  @Test
  void aDeadLetterThatCannotBeDeliveredIsTriedOnceByCoreLoggedAtErrorCountedAndLeftUnacknowledged() {
    AtomicInteger publishes = new AtomicInteger();
    FailingSettlement<String> delivery = new FailingSettlement<>("m-poison", "x", publishes, false);
    List<String> failedSteps = new java.util.concurrent.CopyOnWriteArrayList<>();
    List<Outcome<String>> outcomes = consumer(inbox, (p, tx) -> Mono.error(new NonRetryableException("bad")))
        .metrics(new ConsumerMetrics() {
          @Override
          public void settlementFailed(Delivery<?> d, String step, Throwable error) {
            failedSteps.add(step);
          }
        })
        .build().process(Flux.just(delivery, TestDelivery.of("m-next", "y"))).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(o -> o.delivery().id()).containsExactly("m-next");
    assertThat(publishes.get()).as("core does not retry a settlement the adapter gave up on").isEqualTo(1);
    assertThat(failedSteps).containsExactly("dead-letter");
    assertThat(logged(Level.ERROR, "the dead letter of message 'm-poison' could not be delivered")).hasSize(1);
  }

  @Test
  void aFailedAcknowledgementIsCountedAndTheRedeliveryIsADuplicate() {
    AtomicInteger acks = new AtomicInteger();
    List<String> failedSteps = new java.util.concurrent.CopyOnWriteArrayList<>();
    IdempotentConsumer<String> idem = consumer(inbox, (p, tx) -> insertEffect(tx)).metrics(new ConsumerMetrics() {
      @Override
      public void settlementFailed(Delivery<?> d, String step, Throwable error) {
        failedSteps.add(step);
      }
    }).build();

    List<Outcome<String>> first = idem.process(Flux.just(new FailingSettlement<>("m-1", "x", acks, true))).collectList()
        .block(TIMEOUT);
    Outcome<String> redelivery = idem.process(Flux.just(TestDelivery.of("m-1", "x").redelivered())).blockLast(TIMEOUT);

    assertThat(first).isEmpty();
    assertThat(acks.get()).isEqualTo(1);
    assertThat(failedSteps).containsExactly("ack");
    assertThat(redelivery.status()).isEqualTo(Outcome.Status.DUPLICATE);
    assertThat(effects("m-1")).isEqualTo(1);
  }

  @Test
  void anAckInPlaceThatFailsInABatchLeavesThatMessageUnsettledAndTheOthersSettleInOrder() {
    List<String> failedSteps = new java.util.concurrent.CopyOnWriteArrayList<>();
    List<String> abandoned = new java.util.concurrent.CopyOnWriteArrayList<>();
    IdempotentConsumer<String> idem = consumer(inbox, (p, tx) -> insertEffect(tx)).ordering(Ordering.UNORDERED).concurrency(1)
        .metrics(new ConsumerMetrics() {
          @Override
          public void settlementFailed(Delivery<?> d, String step, Throwable error) {
            failedSteps.add(d.id() + ":" + step);
          }

          @Override
          public void abandoned(Delivery<?> d) {
            abandoned.add(d.id());
          }
        }).build();
    // TestDelivery acks m-2 and m-4 in place and m-1 and m-3 through their Monos: the lost ack is one in place,
    // and the run after it mixes the two ways.
    TestDelivery<String> lost = TestDelivery.of("m-2", "x").withLostAck();
    List<TestDelivery<String>> others = List.of(TestDelivery.of("m-4", "x"), TestDelivery.of("m-1", "x"),
        TestDelivery.of("m-3", "x"));

    List<Outcome<String>> outcomes = idem.process(Flux.just(lost, others.get(0), others.get(1), others.get(2))).collectList()
        .block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::messageId).containsExactly("m-4", "m-1", "m-3");
    assertThat(outcomes).extracting(Outcome::status).containsOnly(Outcome.Status.PROCESSED);
    assertThat(others).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
    assertThat(lost.ackCount()).isZero();
    assertThat(failedSteps).containsExactly("m-2:ack");
    assertThat(abandoned).containsExactly("m-2");
    assertThat(logged(Level.WARN, "the acknowledgement of message 'm-2' failed")).hasSize(1);
    for (String id : List.of("m-1", "m-2", "m-3", "m-4")) {
      assertThat(effects(id)).as("effects of " + id).isEqualTo(1);
    }
    Outcome<String> redelivery = idem.process(Flux.just(TestDelivery.of("m-2", "x").redelivered())).blockLast(TIMEOUT);
    assertThat(redelivery.status()).isEqualTo(Outcome.Status.DUPLICATE);
  }

  // --- 4. JVM errors thrown by user code -------------------------------------------------------

  @Test
  void aHandlerThatThrowsStackOverflowErrorTerminatesTheStreamAndLeavesTheMessageUnacknowledged() {
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    TestDelivery<String> second = TestDelivery.of("m-2", "y");
    Handler<String> overflows = (p, tx) -> {
      throw new StackOverflowError("deep");
    };

    assertThatThrownBy(() -> consumer(inbox, overflows).build().process(Flux.just(delivery, second)).blockLast(TIMEOUT))
        .isInstanceOf(StackOverflowError.class);
    for (TestDelivery<String> d : List.of(delivery, second)) {
      assertThat(d.ackCount()).isZero();
      assertThat(d.deadLetter()).isNull();
      assertThat(inboxRows(d.id())).isZero();
    }
    // The two messages may run on two lanes or share a batch: the one that fails first ends the stream, and is named.
    assertThat(logged(Level.ERROR, "a JVM error while processing")).isNotEmpty()
        .allSatisfy(
            e -> assertThat(e.getFormattedMessage()).containsAnyOf("message 'm-1'", "message 'm-2'", "messages from 'm-1'"));
  }

  @Test
  void aHandlerThatEmitsOutOfMemoryErrorTerminatesTheStreamAndLeavesNothing() {
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    Handler<String> oom = (p, tx) -> Mono.error(new OutOfMemoryError("test: Java heap space"));

    assertThatThrownBy(() -> consumer(inbox, oom).build().process(Flux.just(delivery)).blockLast(TIMEOUT))
        .isInstanceOf(OutOfMemoryError.class);
    assertThat(delivery.ackCount()).isZero();
    assertThat(delivery.deadLetter()).isNull();
    assertThat(inboxRows("m-1")).isZero();
  }

  /**
   * Reactor rethrows a JVM error from inside the handler's chain after an asynchronous step of the
   * handler's own (here a timer; after a statement {@link JvmErrorPathsIntegrationTests} shows the
   * error ending the stream); the pipeline cannot see it, so the transaction timeout ends the
   * attempt and it is retried: never a silent stall, and the half-done effect is rolled back.
   */
  @Test
  void aJvmErrorRethrownByReactorAfterAnAsynchronousStepOfTheHandlersOwnEndsInTheTransactionTimeoutAndARetry() {
    AtomicInteger calls = new AtomicInteger();
    Handler<String> oomOnce = (p, tx) -> insertEffect(tx).then(Mono.delay(Duration.ofMillis(1)))
        .then(calls.incrementAndGet() == 1 ? Mono.error(new OutOfMemoryError("test: Java heap space")) : Mono.empty());

    Outcome<String> outcome = consumer(inbox, oomOnce).transactionTimeout(Duration.ofSeconds(2)).build()
        .process(Flux.just(TestDelivery.of("m-1", "x"))).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(effects("m-1")).isEqualTo(1);
    assertThat(logged(Level.WARN, "infrastructure unavailable while processing message 'm-1'")).hasSize(1);
  }

  @Test
  void aHandlerAssertionErrorIsAnOrdinaryHandlerFailureRetriedThenDeadLettered() {
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    Handler<String> asserts = (p, tx) -> {
      throw new AssertionError("invariant broken");
    };

    Outcome<String> outcome = consumer(inbox, asserts).build().process(Flux.just(delivery)).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(delivery.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(delivery.deadLetter().errorClass()).isEqualTo(AssertionError.class.getName());
  }

  // --- 5. ids and inputs ---------------------------------------------------------------------

  @Test
  void idsThatAreNotWellFormedUtf16AreInvalidNeverApplied() {
    TestDelivery<String> high = TestDelivery.of("\uD800A", "x");
    TestDelivery<String> otherHigh = TestDelivery.of("\uDBFFA", "x");
    TestDelivery<String> lone = TestDelivery.of("A\uDC00", "x");
    TestDelivery<String> emoji = TestDelivery.of("pay-\uD83D\uDCB3", "x");

    List<Outcome<String>> outcomes = consumer(inbox, (p, tx) -> insertEffect(tx)).build()
        .process(Flux.just(high, otherHigh, lone, emoji)).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::status).containsExactly(Outcome.Status.DEAD_LETTERED,
        Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.PROCESSED);
    assertThat(List.of(high, otherHigh, lone)).allSatisfy(d -> {
      assertThat(d.deadLetter().reason()).isEqualTo(DeadLetterReason.INVALID_ID);
      assertThat(d.deadLetter().detail()).contains("unpaired surrogate");
    });
    assertThat(postgres.column("SELECT message_id FROM " + effects)).containsExactly("pay-\uD83D\uDCB3");
  }

  @Test
  void aSchemaQualifiedInboxNamedProcessedMessagesIsCreated() {
    String schema = PostgresService.uniqueName("idem_schema");
    postgres.execute("CREATE SCHEMA " + schema);
    try {
      PostgresInbox qualified = PostgresInbox.create(inbox.connectionFactory(), schema + ".processed_messages");
      qualified.createSchemaIfAbsent().block(TIMEOUT);
      qualified.createSchemaIfAbsent().block(TIMEOUT);

      assertThat(postgres.column("SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname", schema))
          .contains("processed_messages_processed_at_idx", "processed_messages_pkey");
      Outcome<String> outcome = IdempotentConsumer.<String>named(consumer).inbox(qualified).handler((p, tx) -> insertEffect(tx))
          .build().process(Flux.just(TestDelivery.of("m-1", "x"))).blockLast(TIMEOUT);
      assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
      assertThat(postgres.count("SELECT count(*) FROM " + schema + ".processed_messages")).isEqualTo(1);
    } finally {
      postgres.execute("DROP SCHEMA " + schema + " CASCADE");
    }
  }

  // --- 6. bounded log lines ------------------------------------------------------------------

  @Test
  void deadLetterLogLinesAreBoundedWhateverTheErrorTextAndIdLength() {
    String hugeMessage = "x".repeat(100_000);
    String longId = "i".repeat(5_000);
    TestDelivery<String> delivery = TestDelivery.of(longId, "x");

    consumer(inbox, (p, tx) -> Mono.error(new NonRetryableException(hugeMessage))).maxIdLength(10_000).build()
        .process(Flux.just(delivery)).blockLast(TIMEOUT);

    List<ILoggingEvent> lines = logged(Level.WARN, "dead-lettered message");
    assertThat(lines).hasSize(1);
    assertThat(lines.get(0).getFormattedMessage().length()).isLessThan(2_000);
    assertThat(delivery.deadLetter().errorMessage()).as("the dead letter itself keeps the full text").hasSize(100_000);
  }

  /** A delivery whose ack or dead-letter settlement always fails, counting the tries. */
  private static final class FailingSettlement<T> extends AbstractDelivery<T> {
    private final String id;
    private final T payload;
    private final AtomicInteger tries;
    private final boolean failAck;

    FailingSettlement(String id, T payload, AtomicInteger tries, boolean failAck) {
      this.id = id;
      this.payload = payload;
      this.tries = tries;
      this.failAck = failAck;
    }

    @Override
    public String id() {
      return id;
    }

    @Override
    public T payload() {
      return payload;
    }

    @Override
    protected Mono<Void> doAck() {
      if (failAck) {
        tries.incrementAndGet();
        return Mono.error(new IOException("channel closed before the ack"));
      }
      return Mono.empty();
    }

    @Override
    protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
      tries.incrementAndGet();
      return Mono.error(new IOException("RecordTooLargeException: the dead-letter topic refused the record"));
    }
  }
}
