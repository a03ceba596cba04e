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
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.core.publisher.Sinks;

/**
 * {@link GracefulShutdown} against a real PostgreSQL, per message and batched: a stop with enough
 * grace rolls nothing back, a stop with too little loses nothing.
 */
class GracefulShutdownIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private String consumer;
  /** Ids whose handler began, in any attempt. */
  private final Set<String> handlerStarted = ConcurrentHashMap.newKeySet();

  @BeforeEach
  void setUp() {
    pool = postgres.pool(16);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, v int)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  /** Writes the effect, then lingers inside the transaction for {@code linger}. */
  private Handler<Integer> effectThenLinger(Duration linger) {
    return (value, tx) -> {
      handlerStarted.add(tx.messageId());
      return tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, value)
          .execute().then(Mono.delay(linger));
    };
  }

  private IdempotentConsumer<Integer> consumer(Handler<Integer> handler, int maxBatchSize) {
    return IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(handler)
        .concurrency(4).prefetch(16).maxBatchSize(maxBatchSize).ordering(Ordering.UNORDERED)
        .retry(RetryPolicy.backoff(3, Duration.ofMillis(10)))
        .build();
  }

  private static List<TestDelivery<Integer>> deliveries(int n) {
    List<TestDelivery<Integer>> all = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      all.add(TestDelivery.of("m-" + i, i));
    }
    return all;
  }

  private long effects(String id) {
    return postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", id);
  }

  private long inboxRows(String id) {
    return postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE consumer = $1 AND message_id = $2", consumer, id);
  }

  /** A running stream: its outcomes, how it ended, and whether its source was cancelled. */
  private static final class Running {
    final List<Outcome<Integer>> outcomes = new CopyOnWriteArrayList<>();
    final AtomicReference<SignalType> ended = new AtomicReference<>();
    final AtomicBoolean sourceCancelled = new AtomicBoolean();
    final AtomicReference<Throwable> error = new AtomicReference<>();
  }

  private Running start(IdempotentConsumer<Integer> idem, List<TestDelivery<Integer>> deliveries, GracefulShutdown shutdown) {
    Running running = new Running();
    // A source that never completes by itself, like a broker's.
    Flux<Delivery<Integer>> source = Flux.<Delivery<Integer>>fromIterable(deliveries).concatWith(Flux.never())
        .doOnCancel(() -> running.sourceCancelled.set(true));
    idem.process(source, shutdown)
        .doFinally(running.ended::set)
        .subscribe(running.outcomes::add, running.error::set);
    return running;
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void stopWithEnoughGraceLetsEveryStartedMessageCommitAndAckAndRollsNothingBack(int maxBatchSize) {
    List<TestDelivery<Integer>> deliveries = deliveries(200);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(consumer(effectThenLinger(Duration.ofMillis(200)), maxBatchSize), deliveries, shutdown);
    await().atMost(TIMEOUT).until(() -> running.outcomes.size() >= 8);

    ShutdownReport report = shutdown.stop(Duration.ofSeconds(10)).block(TIMEOUT);

    assertThat(report).isNotNull();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(running.error.get()).isNull();
    assertThat(running.sourceCancelled.get()).isTrue();
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(report.completedInFlight()).isPositive();
    // Every message whose handler ran committed exactly one effect and one inbox row, and was acked: nothing rolled back.
    assertThat(handlerStarted).isNotEmpty();
    for (TestDelivery<Integer> d : deliveries) {
      boolean started = handlerStarted.contains(d.id());
      assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(started ? 1 : 0);
      assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isEqualTo(started ? 1 : 0);
      assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(started ? 1 : 0);
    }
    assertThat(running.outcomes).hasSize(handlerStarted.size());
    assertThat(running.outcomes).allMatch(o -> o.status() == Outcome.Status.PROCESSED);
    // The stop left messages unstarted; those it received are counted (with batches, lanes take
    // every message they receive into a running batch when they can, so that count may be 0).
    assertThat(handlerStarted).as("messages started before the stop").hasSizeLessThan(deliveries.size());
    assertThat(report.notStarted()).isLessThanOrEqualTo(deliveries.size() - handlerStarted.size());
    if (maxBatchSize == 1) {
      assertThat(report.notStarted()).as("messages received that waited for their turn, not started").isPositive();
    }
    // The same result for a second call.
    assertThat(shutdown.stop(Duration.ZERO).block(TIMEOUT)).isEqualTo(report);
    assertThat(shutdown.isStopping()).isTrue();
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void stopWithTooShortGraceAbandonsInFlightMessagesWhichLeaveNoTraceAndApplyOnceWhenRedelivered(int maxBatchSize) {
    List<TestDelivery<Integer>> deliveries = deliveries(20);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(consumer(effectThenLinger(Duration.ofSeconds(5)), maxBatchSize), deliveries, shutdown);
    await().atMost(TIMEOUT).until(() -> handlerStarted.size() >= 4);

    ShutdownReport report = shutdown.stop(Duration.ofMillis(200)).block(TIMEOUT);

    assertThat(report).isNotNull();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(report.withinGracePeriod()).isFalse();
    assertThat(report.abandonedInFlight()).isPositive();
    assertThat(running.outcomes).isEmpty();
    for (TestDelivery<Integer> d : deliveries) {
      assertThat(d.ackCount()).as("acks of %s", d.id()).isZero();
    }
    // Rolled back: no effect, no inbox row (the rollback may still be on its way to the server).
    await().atMost(TIMEOUT).untilAsserted(() -> {
      for (TestDelivery<Integer> d : deliveries) {
        assertThat(effects(d.id())).as("effects of %s", d.id()).isZero();
        assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isZero();
      }
    });

    // The broker redelivers everything; a later run applies each message once.
    List<TestDelivery<Integer>> redelivered = deliveries.stream().map(TestDelivery::redelivered).toList();
    GracefulShutdown second = GracefulShutdown.create();
    Running rerun = start(consumer(effectThenLinger(Duration.ZERO), maxBatchSize), redelivered, second);
    await().atMost(TIMEOUT).until(() -> rerun.outcomes.size() == redelivered.size());
    ShutdownReport idle = second.stop(Duration.ofSeconds(10)).block(TIMEOUT);
    assertThat(idle.abandonedInFlight()).isZero();
    for (TestDelivery<Integer> d : redelivered) {
      assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(1);
      assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isEqualTo(1);
      assertThat(d.ackCount()).isEqualTo(1);
    }
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void aMessageWaitingInRetryBackoffIsAbandonedAtOnceNotWaitedFor(int maxBatchSize) {
    AtomicInteger attempts = new AtomicInteger();
    Handler<Integer> failsOnce = (value, tx) -> {
      attempts.incrementAndGet();
      return Mono.error(new IllegalStateException("transient"));
    };
    IdempotentConsumer<Integer> idem = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(failsOnce)
        .maxBatchSize(maxBatchSize).retry(RetryPolicy.backoff(5, Duration.ofMinutes(10))).build();
    TestDelivery<Integer> delivery = TestDelivery.of("m-backoff", 1);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(idem, List.of(delivery), shutdown);
    await().atMost(TIMEOUT).until(() -> attempts.get() == 1);

    // A grace period longer than the test's timeout: only abandoning the backoff ends the stop in time.
    ShutdownReport report = shutdown.stop(Duration.ofMinutes(5)).block(TIMEOUT);

    assertThat(report.abandonedInFlight()).isEqualTo(1);
    assertThat(report.completedInFlight()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(running.outcomes).isEmpty();
    assertThat(delivery.ackCount()).isZero();
    assertThat(delivery.deadLetter()).isNull();
    assertThat(attempts.get()).isEqualTo(1);
  }

  /**
   * One message fails its first attempt, with a handler error (retried alone; in batch mode off
   * its lane) or with contention (in batch mode the whole batch waits and is retried), and the
   * stop begins while it waits in a 1 s backoff. The backoff ends well within the grace period, so
   * the stop waits for the retry: nothing is abandoned, every started message commits once and is
   * acknowledged, and none is left to be redelivered.
   */
  @ParameterizedTest(name = "maxBatchSize={0}, {1}")
  @org.junit.jupiter.params.provider.CsvSource({"1, handler-error", "1, contention", "8, handler-error", "8, contention",
      "8, batch-handler-contention", "8, batch-handler-error"})
  void aRetryBackoffThatEndsWithinTheGracePeriodIsWaitedForNotAbandoned(int maxBatchSize, String failure) {
    Set<String> failed = ConcurrentHashMap.newKeySet();
    java.util.function.BiFunction<Integer, Tx, Mono<Void>> effect = (value, tx) -> {
      String id = value == null ? tx.messageId() : "m-" + value;
      Mono<Void> write = tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)").bind(0, id).bind(1, value)
          .execute().then();
      if (value != 3 || !failed.add(id)) {
        return write;
      }
      return failure.endsWith("contention")
          ? write.then(tx.sql("DO $$BEGIN RAISE EXCEPTION 'test: could not serialize' USING ERRCODE = '40001'; END$$").execute())
              .then()
          : write.then(Mono.error(new IllegalStateException("test: transient")));
    };
    IdempotentConsumer.Builder<Integer> builder = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .concurrency(2).prefetch(16).maxBatchSize(maxBatchSize).ordering(Ordering.UNORDERED)
        .retry(RetryPolicy.backoff(5, Duration.ofSeconds(2)));
    IdempotentConsumer<Integer> idem = failure.startsWith("batch-handler")
        ? builder.batchHandler((items, tx) -> Flux.fromIterable(items).concatMap(i -> effect.apply(i.payload(), tx)).then())
            .build()
        : builder.handler((value, tx) -> effect.apply(value, tx)).build();
    List<TestDelivery<Integer>> deliveries = deliveries(8);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(idem, deliveries, shutdown);
    await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(5)).until(() -> failed.contains("m-3"));

    ShutdownReport report = shutdown.stop(Duration.ofSeconds(30)).block(TIMEOUT);

    assertThat(report.abandonedInFlight()).as("abandoned in flight").isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    TestDelivery<Integer> retried = deliveries.get(3);
    assertThat(retried.ackCount()).as("the message that waited in its backoff was acknowledged").isEqualTo(1);
    assertThat(effects(retried.id())).isEqualTo(1);
    for (TestDelivery<Integer> d : deliveries) {
      assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(d.ackCount());
      assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isEqualTo(d.ackCount());
      assertThat(d.deadLetter()).isNull();
    }
    assertThat(running.outcomes).extracting(o -> o.delivery().id()).contains(retried.id()).doesNotHaveDuplicates();
  }

  @Test
  void aSplitBatchWhoseFailingMessageWaitsInBackoffIsAbandonedAtOnceWithTheRestOfItsBatch() {
    Sinks.Empty<Void> releaseFirst = Sinks.empty();
    AtomicInteger failures = new AtomicInteger();
    Handler<Integer> handler = (value, tx) -> {
      handlerStarted.add(tx.messageId());
      if (value == 0) {
        return releaseFirst.asMono().then(tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
            .bind(0, tx.messageId()).bind(1, value).execute());
      }
      failures.incrementAndGet();
      return Mono.error(new IllegalStateException("transient"));
    };
    // One lane: m-0 runs alone and holds the lane while m-1..m-4 queue; they then form one batch,
    // m-1 fails, the batch splits and m-1 waits in a 10-minute backoff before m-2..m-4.
    IdempotentConsumer<Integer> idem = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(handler)
        .concurrency(1).prefetch(16).maxBatchSize(8).retry(RetryPolicy.backoff(5, Duration.ofMinutes(10))).build();
    List<TestDelivery<Integer>> deliveries = deliveries(5);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(idem, deliveries, shutdown);
    await().atMost(TIMEOUT).until(() -> handlerStarted.contains("m-0"));
    releaseFirst.tryEmitEmpty();
    await().atMost(TIMEOUT).until(() -> failures.get() >= 1);

    ShutdownReport report = shutdown.stop(Duration.ofMinutes(5)).block(TIMEOUT);

    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(report.abandonedInFlight()).isEqualTo(4);
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(running.outcomes).extracting(o -> o.delivery().id()).containsExactly("m-0");
    assertThat(effects("m-0")).isEqualTo(1);
    for (TestDelivery<Integer> d : deliveries.subList(1, 5)) {
      assertThat(d.ackCount()).as("acks of %s", d.id()).isZero();
      assertThat(d.deadLetter()).isNull();
      assertThat(inboxRows(d.id())).isZero();
    }
  }

  /**
   * The stream completes once every outcome travelled downstream; a subscriber that stopped
   * requesting cannot hold the stop beyond its grace period: the stream then completes without
   * the outcomes it never asked for (their messages committed and were acknowledged).
   */
  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void aSubscriberThatStopsRequestingCannotHoldTheStopBeyondTheGracePeriod(int maxBatchSize) {
    List<TestDelivery<Integer>> deliveries = deliveries(6);
    List<Outcome<Integer>> received = new CopyOnWriteArrayList<>();
    AtomicReference<SignalType> ended = new AtomicReference<>();
    GracefulShutdown shutdown = GracefulShutdown.create();
    Flux<Delivery<Integer>> source = Flux.<Delivery<Integer>>fromIterable(deliveries).concatWith(Flux.never());
    consumer(effectThenLinger(Duration.ZERO), maxBatchSize).process(source, shutdown)
        .doFinally(ended::set)
        .subscribe(new reactor.core.publisher.BaseSubscriber<Outcome<Integer>>() {
          @Override
          protected void hookOnSubscribe(org.reactivestreams.Subscription subscription) {
            subscription.request(2);
          }

          @Override
          protected void hookOnNext(Outcome<Integer> outcome) {
            received.add(outcome);
          }
        });
    await().atMost(TIMEOUT).until(() -> deliveries.stream().allMatch(d -> d.ackCount() == 1));

    ShutdownReport report = shutdown.stop(Duration.ofSeconds(1)).block(TIMEOUT);

    assertThat(ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(received).hasSize(2);
    deliveries.forEach(d -> assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(1));
  }

  @Test
  void stopBeforeSubscribingEndsTheStreamAtOnceWithoutTouchingTheSource() {
    GracefulShutdown shutdown = GracefulShutdown.create();
    ShutdownReport report = shutdown.stop(Duration.ofSeconds(1)).block(TIMEOUT);
    assertThat(report).isEqualTo(new ShutdownReport(0, 0, 0, true, Duration.ZERO));

    AtomicBoolean subscribed = new AtomicBoolean();
    Flux<Delivery<Integer>> source = Flux.<Delivery<Integer>>never().doOnSubscribe(s -> subscribed.set(true));
    List<Outcome<Integer>> outcomes = consumer(effectThenLinger(Duration.ZERO), 1).process(source, shutdown)
        .collectList().block(TIMEOUT);

    assertThat(outcomes).isEmpty();
    assertThat(subscribed.get()).isFalse();
  }

  @Test
  void stopOfAnIdleStreamCompletesItAndReportsNothingInFlight() {
    List<TestDelivery<Integer>> deliveries = deliveries(5);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(consumer(effectThenLinger(Duration.ZERO), 1), deliveries, shutdown);
    await().atMost(TIMEOUT).until(() -> running.outcomes.size() == 5);

    ShutdownReport report = shutdown.stop(Duration.ofSeconds(30)).block(TIMEOUT);

    assertThat(report.completedInFlight()).isZero();
    assertThat(report.abandonedInFlight()).isZero();
    assertThat(report.notStarted()).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(running.sourceCancelled.get()).isTrue();
    deliveries.forEach(d -> assertThat(effects(d.id())).isEqualTo(1));
  }

  @Test
  void aFailedBatchMessageRetriedOffItsLaneIsWaitedForWithinTheGracePeriod() {
    Sinks.Empty<Void> releaseRetry = Sinks.empty();
    AtomicInteger m1Attempts = new AtomicInteger();
    Handler<Integer> handler = (value, tx) -> {
      handlerStarted.add(tx.messageId() + "#" + (value == 1 ? m1Attempts.incrementAndGet() : 1));
      Mono<Void> effect = tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
          .bind(0, tx.messageId()).bind(1, value).execute().then();
      if (value != 1) {
        return effect;
      }
      // m-1 fails in its batch, then its retry, off the lane, writes its effect and waits inside
      // its transaction until the test lets it commit.
      return m1Attempts.get() == 1 ? Mono.error(new IllegalStateException("transient")) : effect.then(releaseRetry.asMono());
    };
    IdempotentConsumer<Integer> idem = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(handler)
        .concurrency(1).prefetch(16).maxBatchSize(8).retry(RetryPolicy.backoff(5, Duration.ofMillis(10))).build();
    List<TestDelivery<Integer>> deliveries = deliveries(4);
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(idem, deliveries, shutdown);
    await().atMost(TIMEOUT).until(() -> handlerStarted.contains("m-1#2"));

    Mono<ShutdownReport> stopping = shutdown.stop(Duration.ofSeconds(30)).cache();
    stopping.subscribe();
    releaseRetry.tryEmitEmpty();
    ShutdownReport report = stopping.block(TIMEOUT);

    assertThat(report.abandonedInFlight()).as("abandoned in flight").isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    TestDelivery<Integer> retried = deliveries.get(1);
    assertThat(effects(retried.id())).as("effects of the retried message").isEqualTo(1);
    assertThat(inboxRows(retried.id())).isEqualTo(1);
    assertThat(retried.ackCount()).as("the retried message was acknowledged").isEqualTo(1);
    for (TestDelivery<Integer> d : deliveries) {
      assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(d.ackCount());
      assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isEqualTo(d.ackCount());
    }
  }

  /**
   * A batch's first message runs past the slowMessageThreshold and is detached; the stop comes
   * while it is slow. The detached message settles alone first, and only then the rest of its
   * batch (its last message waits for that): so the batch's last outcome is the stream's last. The
   * batch handed the detached message to a flight of its own, and that message is not counted
   * again as abandoned when the stream completes on the batch's last outcome: nothing is abandoned.
   */
  @Test
  void aMessageDetachedFromItsBatchIsNotCountedAbandonedWhenItsBatchSettlesLast() {
    List<TestDelivery<Integer>> deliveries = deliveries(6);
    TestDelivery<Integer> detached = deliveries.get(0);
    Sinks.Empty<Void> slowStarted = Sinks.empty();
    AtomicInteger slowRuns = new AtomicInteger();
    Handler<Integer> handler = (value, tx) -> {
      handlerStarted.add(tx.messageId());
      Mono<Void> effect = tx.sql("INSERT INTO " + effects + " (message_id, v) VALUES ($1, $2)")
          .bind(0, tx.messageId()).bind(1, value).execute().then();
      if (value == 0 && slowRuns.incrementAndGet() == 1) {
        // Slow in its batch: past the threshold it is detached (this attempt is cancelled and rolls back).
        return effect.then(Mono.fromRunnable(slowStarted::tryEmitEmpty)).then(Mono.delay(Duration.ofSeconds(10))).then();
      }
      if (value == 5) {
        // The batch's last message commits only once the detached one has settled alone.
        return effect.then(Flux.interval(Duration.ofMillis(10)).filter(tick -> detached.ackCount() > 0).next()).then();
      }
      return effect;
    };
    IdempotentConsumer<Integer> idem = IdempotentConsumer.<Integer>named(consumer).inbox(inbox).handler(handler)
        .concurrency(1).prefetch(16).maxBatchSize(8).batchMaxWait(Duration.ofMillis(200)).ordering(Ordering.UNORDERED)
        .slowMessageThreshold(Duration.ofMillis(300)).transactionTimeout(Duration.ofSeconds(30))
        .retry(RetryPolicy.backoff(5, Duration.ofMillis(10))).build();
    GracefulShutdown shutdown = GracefulShutdown.create();
    Running running = start(idem, deliveries, shutdown);
    slowStarted.asMono().block(TIMEOUT);

    ShutdownReport report = shutdown.stop(Duration.ofSeconds(30)).block(TIMEOUT);

    assertThat(slowRuns.get()).as("detached, then run alone").isEqualTo(2);
    assertThat(report.abandonedInFlight()).as("abandoned in flight: %s", report).isZero();
    assertThat(report.withinGracePeriod()).isTrue();
    assertThat(running.ended.get()).isEqualTo(SignalType.ON_COMPLETE);
    assertThat(running.outcomes).hasSize(6);
    assertThat(running.outcomes.get(running.outcomes.size() - 1).messageId()).as("the batch's last message settles last")
        .isEqualTo("m-5");
    for (TestDelivery<Integer> d : deliveries) {
      assertThat(effects(d.id())).as("effects of %s", d.id()).isEqualTo(1);
      assertThat(inboxRows(d.id())).as("inbox rows of %s", d.id()).isEqualTo(1);
      assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(1);
    }
  }
}
