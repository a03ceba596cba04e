package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A statement that PostgreSQL itself stops on a timeout ({@code statement_timeout}: 57014,
 * {@code lock_timeout}: 55P03) inside a handler is the running message's, as the client's
 * {@code transactionTimeout} is: its batch splits, the others commit, and it goes on alone. The
 * same timeout in the pipeline's own statements (here the dedup insert) stays the database's: the
 * batch is retried as a unit and nothing is split off or dead-lettered.
 */
class ServerCancelledStatementIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final RetryPolicy FAST = RetryPolicy.backoff(3, Duration.ofMillis(20))
      .withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(200));
  // The server stops a statement after 500 ms; the client's transactionTimeout (5 s) never strikes first.
  private static final ServerTimeouts STATEMENT = new ServerTimeouts(Duration.ofMillis(500), Duration.ZERO, Duration.ZERO);
  // A lock wait ends after 300 ms, well before the statement timeout would end it (as 57014).
  private static final ServerTimeouts LOCK = new ServerTimeouts(Duration.ofSeconds(3), Duration.ofMillis(300), Duration.ZERO);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String locks;
  private String effects;
  private String consumer;
  private ch.qos.logback.classic.Logger logger;
  private ListAppender<ILoggingEvent> logs;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    locks = PostgresService.uniqueName("locks");
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + locks + " (id int PRIMARY KEY)", "INSERT INTO " + locks + " VALUES (1)",
        "CREATE TABLE " + effects + " (seq bigserial PRIMARY KEY, message_id text NOT NULL)");
    logger = (ch.qos.logback.classic.Logger) LoggerFactory.getLogger(IdempotentConsumer.class);
    logs = new ListAppender<>();
    logs.start();
    logger.addAppender(logs);
  }

  @AfterEach
  void tearDown() {
    logger.detachAppender(logs);
    postgres.execute("DROP TABLE IF EXISTS " + locks, "DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  /**
   * Ten messages of distinct keys share a batch; the handler of 'slow' runs a statement that the
   * server stops (a {@code pg_sleep} past {@code statement_timeout}, or a row lock another
   * transaction holds past {@code lock_timeout}) until the test lets it through. The nine others
   * commit once, each handler having run no more often than the split needs (a per-message
   * handler's twice: the failed batch attempt, then the split's commit; a batch handler's once per
   * halving): the batch was not retried as a unit; 'slow' is neither acked nor dead-lettered, is
   * retried alone, and the WARN names it. Once let through, it commits exactly once.
   */
  @ParameterizedTest(name = "{0}, {1}")
  @CsvSource({"per-message handler, statement_timeout", "per-message handler, lock_timeout",
      "batch handler, statement_timeout", "batch handler, lock_timeout"})
  void aHandlerStatementTheServerStopsOnATimeoutIsTheRunningMessagesAndItsBatchCommitsWithoutIt(String style, String timeout) {
    boolean lock = timeout.equals("lock_timeout");
    List<TestDelivery<String>> deliveries = new ArrayList<>();
    for (int i = 0; i < 9; i++) {
      deliveries.add(TestDelivery.keyed("g" + i, "k" + i, "good"));
    }
    TestDelivery<String> slow = TestDelivery.keyed("slow", "k-slow", "slow");
    deliveries.add(3, slow);
    AtomicBoolean stalled = new AtomicBoolean(true);
    AtomicInteger slowAttempts = new AtomicInteger();
    Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    String stall = lock ? "SELECT id FROM " + locks + " WHERE id = 1 FOR UPDATE" : "SELECT pg_sleep(3)";
    java.util.function.BiFunction<String, Tx, Mono<Void>> effect = (id, tx) -> {
      runs.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
      Mono<Void> write = tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, id).execute().then();
      if (!id.equals("slow")) {
        return write;
      }
      slowAttempts.incrementAndGet();
      return stalled.get() ? write.then(tx.sql(stall).execute()).then() : write;
    };
    IdempotentConsumer.Builder<String> builder = IdempotentConsumer.<String>named(consumer).inbox(inbox)
        .ordering(Ordering.BY_KEY).concurrency(1).prefetch(256).maxBatchSize(64).batchMaxWait(Duration.ofMillis(100))
        .transactionTimeout(Duration.ofSeconds(5)).serverTimeouts(lock ? LOCK : STATEMENT).retry(FAST);
    IdempotentConsumer<String> idem = style.equals("batch handler")
        ? builder.batchHandler((items, tx) -> Flux.fromIterable(items).concatMap(i -> effect.apply(i.messageId(), tx)).then())
            .build()
        : builder.handler((payload, tx) -> effect.apply(tx.messageId(), tx)).build();

    Connection holder = lock ? holdRowLock() : null;
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    Disposable running = idem.process(Flux.<Delivery<String>>fromIterable(deliveries).concatWith(Flux.never()))
        .subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(9));
      int attemptsSoFar = slowAttempts.get();
      await().atMost(TIMEOUT).until(() -> slowAttempts.get() > attemptsSoFar);

      assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED))
          .extracting(o -> o.delivery().id()).doesNotContain("slow");
      assertThat(slow.ackCount()).isZero();
      assertThat(slow.deadLetter()).isNull();
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = 'slow'")).isZero();
      for (TestDelivery<String> d : deliveries) {
        if (d != slow) {
          assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", d.id()))
              .as("effects of %s", d.id()).isEqualTo(1);
          assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(1);
          // A per-message handler's batch splits at the message; a batch handler's by halves (10 -> 5 -> 3 -> 2 -> 1).
          assertThat(runs.get(d.id()).get()).as("runs of %s: the batch is split, not retried as a unit", d.id())
              .isLessThanOrEqualTo(style.equals("batch handler") ? 5 : 2);
        }
      }
      String state = lock ? "55P03" : "57014";
      assertThat(logs.list).anySatisfy(e -> {
        assertThat(e.getLevel()).isEqualTo(Level.WARN);
        assertThat(e.getFormattedMessage()).contains("the server stopped a statement of").contains("SQLSTATE " + state)
            .contains("the batch is split");
        if (style.equals("per-message handler")) {
          assertThat(e.getFormattedMessage()).contains("the handler of message 'slow'");
        }
      });
      assertThat(logs.list).anySatisfy(e -> assertThat(e.getFormattedMessage()).contains("message 'slow'").contains(state));

      stalled.set(false);
      if (holder != null) {
        Mono.from(holder.rollbackTransaction()).block(TIMEOUT);
      }
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(10));
      assertThat(slow.ackCount()).isEqualTo(1);
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = 'slow'")).isEqualTo(1);
      assertThat(postgres.count("SELECT count(*) FROM " + inbox.table())).isEqualTo(10);
    } finally {
      running.dispose();
      if (holder != null) {
        Mono.from(holder.close()).block(TIMEOUT);
      }
    }
  }

  /**
   * Another transaction holds the dedup row of one message of the batch (inserted, not committed),
   * so the batch's dedup insert waits for it past {@code lock_timeout}: the pipeline's own
   * statement, not a handler's. The batch is retried as a unit, splits nothing off and
   * dead-letters nothing; when the other transaction rolls back, all of it commits once.
   */
  @Test
  void aTimeoutInTheDedupInsertStaysTheDatabasesAndRetriesTheWholeBatch() {
    List<TestDelivery<String>> deliveries = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      deliveries.add(TestDelivery.keyed("m" + i, "k" + i, "good"));
    }
    AtomicInteger handlerRuns = new AtomicInteger();
    List<ErrorKind> retries = new CopyOnWriteArrayList<>();
    IdempotentConsumer<String> idem = IdempotentConsumer.<String>named(consumer).inbox(inbox)
        .handler((payload, tx) -> {
          handlerRuns.incrementAndGet();
          return tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute();
        })
        .ordering(Ordering.BY_KEY).concurrency(1).prefetch(256).maxBatchSize(64).batchMaxWait(Duration.ofMillis(100))
        .transactionTimeout(Duration.ofSeconds(5)).serverTimeouts(LOCK).retry(FAST)
        .metrics(new ConsumerMetrics() {
          @Override
          public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
            retries.add(kind);
          }
        }).build();
    Connection holder = Mono.from(postgres.connectionFactory().create()).block(TIMEOUT);
    Mono.from(holder.beginTransaction()).block(TIMEOUT);
    Flux.from(
        holder.createStatement("INSERT INTO " + inbox.table() + " (consumer, message_id) VALUES ($1, 'm2')").bind(0, consumer)
            .execute())
        .flatMap(r -> r.getRowsUpdated()).blockLast(TIMEOUT);
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    Disposable running = idem.process(Flux.<Delivery<String>>fromIterable(deliveries).concatWith(Flux.never()))
        .subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).until(() -> retries.size() >= 3);
      assertThat(retries).as("retried as the database's").containsOnly(ErrorKind.INFRASTRUCTURE);
      assertThat(logs.list)
          .anySatisfy(e -> assertThat(e.getFormattedMessage()).contains("infrastructure unavailable").contains("55P03"));
      assertThat(outcomes).isEmpty();
      assertThat(handlerRuns.get()).as("the dedup insert never got through, so no handler ran").isZero();
      assertThat(logs.list).noneSatisfy(e -> assertThat(e.getFormattedMessage()).contains("split"));
      assertThat(deliveries).allSatisfy(d -> {
        assertThat(d.ackCount()).isZero();
        assertThat(d.deadLetter()).isNull();
      });

      Mono.from(holder.rollbackTransaction()).block(TIMEOUT);
      await().atMost(TIMEOUT).untilAsserted(() -> assertThat(outcomes).hasSize(6));
      assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
      assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(6);
      assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).isEqualTo(1));
    } finally {
      running.dispose();
      Mono.from(holder.close()).block(TIMEOUT);
    }
  }

  /** A connection of its own that holds the row lock the 'slow' handler asks for, in an open transaction. */
  private Connection holdRowLock() {
    Connection holder = Mono.from(postgres.connectionFactory().create()).block(TIMEOUT);
    Mono.from(holder.beginTransaction()).block(TIMEOUT);
    Flux.from(holder.createStatement("SELECT id FROM " + locks + " WHERE id = 1 FOR UPDATE").execute())
        .flatMap(r -> r.map((row, meta) -> 1)).blockLast(TIMEOUT);
    return holder;
  }
}
