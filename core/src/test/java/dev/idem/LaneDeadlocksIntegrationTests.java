package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.R2dbcException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Handlers of different keys update shared rows in opposite orders (each message two of four
 * rows; the forward keys the lower row first, the backward keys the higher first), so that transactions of different lanes
 * deadlock; PostgreSQL detects each deadlock after {@code deadlock_timeout} (1 s by default) and
 * aborts one of them with {@code 40P01}. The consumer must resolve them without paying that
 * again and again: no message deadlocks twice, the number of deadlocks stays small (it does not
 * grow with the number of messages), every effect is applied exactly once, every message is
 * acknowledged once, and the order of each key holds.
 */
class LaneDeadlocksIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofMinutes(5);
  private static final int MESSAGES = 160;
  private static final int KEYS = 4;
  /**
   * The shared rows a message updates, by its number within its key: the forward keys update
   * the lower row first, the backward keys the higher. With more than two rows a batch takes
   * new row locks all along, not only at its start, so that batches of two lanes deadlock too.
   */
  private static final long[][] ROW_PAIRS = {{1, 2}, {3, 4}, {1, 3}, {2, 4}, {1, 4}, {2, 3}};

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String shared;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
    shared = PostgresService.uniqueName("shared");
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + shared + " (id bigint PRIMARY KEY, n bigint NOT NULL)",
        "INSERT INTO " + shared + " SELECT g, 0 FROM generate_series(1, 4) g",
        "CREATE TABLE " + effects + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, k text NOT NULL, n int NOT NULL)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + shared, "DROP TABLE IF EXISTS " + effects,
        "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  private record Move(String key, int n, boolean forward) {}

  /**
   * Batch mode: two lanes, the forward keys on one and the backward keys on the other (by the
   * lanes' {@code hash % lanes}), batches of up to 16. Per-message mode: four keys at once.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"batch mode", "per-message mode"})
  void handlersOfTwoKeysThatUpdateSharedRowsInOppositeOrdersDeadlockOnlyAFewTimesAndApplyEveryEffectOnce(String mode) {
    boolean batched = mode.equals("batch mode");
    int lanes = batched ? 2 : KEYS;
    List<String> forwardKeys = keysOnLane(lanes == 2 ? 0 : -1, "fwd");
    List<String> backwardKeys = keysOnLane(lanes == 2 ? 1 : -1, "bwd");
    List<TestDelivery<Move>> deliveries = new ArrayList<>();
    Map<String, AtomicInteger> perKey = new ConcurrentHashMap<>();
    for (int i = 0; i < MESSAGES; i++) {
      boolean forward = i % 2 == 0;
      String key = (forward ? forwardKeys : backwardKeys).get((i / 2) % (KEYS / 2));
      int n = perKey.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      deliveries.add(TestDelivery.keyed("m-" + i, key, new Move(key, n, forward)));
    }
    Map<String, Integer> deadlocksPerMessage = new ConcurrentHashMap<>();
    Handler<Move> oppositeOrders = (move, tx) -> {
      long[] rows = ROW_PAIRS[move.n() % ROW_PAIRS.length];
      long first = move.forward() ? rows[0] : rows[1];
      long second = move.forward() ? rows[1] : rows[0];
      return tx.sql("UPDATE " + shared + " SET n = n + 1 WHERE id = $1").bind(0, first).execute()
          // A pause between the two updates lets the transactions of other keys take their first row.
          .then(Mono.delay(Duration.ofMillis(2)))
          .then(tx.sql("UPDATE " + shared + " SET n = n + 1 WHERE id = $1").bind(0, second).execute())
          .then(tx.sql("INSERT INTO " + effects + " (message_id, k, n) VALUES ($1, $2, $3)")
              .bind(0, tx.messageId()).bind(1, move.key()).bind(2, move.n()).execute())
          .doOnError(error -> {
            if (isDeadlock(error)) {
              deadlocksPerMessage.merge(tx.messageId(), 1, Integer::sum);
            }
          });
    };
    long deadlocksBefore = databaseDeadlocks();
    long start = System.nanoTime();

    List<Outcome<Move>> outcomes = IdempotentConsumer.<Move>named(consumer).inbox(inbox).handler(oppositeOrders)
        .ordering(Ordering.BY_KEY).concurrency(lanes).prefetch(batched ? 64 : 32).maxBatchSize(batched ? 16 : 1)
        .retry(RetryPolicy.backoff(5, Duration.ofMillis(5)))
        .build()
        .process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    pool.dispose(); // its backends exit and flush their statistics
    int deadlocks = deadlocksPerMessage.values().stream().mapToInt(Integer::intValue).sum();
    System.out.printf(
        "LaneDeadlocks [%s]: %d messages, %d deadlocks seen by the handlers (%d messages hit one, at most %d times),"
            + " pg_stat_database.deadlocks of the database +%d (whatever ran on it meanwhile), %d ms%n",
        mode, MESSAGES, deadlocks, deadlocksPerMessage.size(),
        deadlocksPerMessage.values().stream().mapToInt(Integer::intValue).max().orElse(0),
        databaseDeadlocks() - deadlocksBefore, Duration.ofNanos(System.nanoTime() - start).toMillis());

    assertThat(outcomes).hasSize(MESSAGES).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    assertThat(deliveries).allSatisfy(d -> assertThat(d.ackCount()).as("acks of %s", d.id()).isEqualTo(1));
    assertThat(postgres.count("SELECT count(DISTINCT message_id) FROM " + effects)).as("messages with an effect")
        .isEqualTo(MESSAGES);
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).as("effects").isEqualTo(MESSAGES);
    long[] expected = new long[5];
    deliveries.forEach(d -> {
      for (long row : ROW_PAIRS[d.payload().n() % ROW_PAIRS.length]) {
        expected[(int) row]++;
      }
    });
    for (long row = 1; row <= 4; row++) {
      assertThat(postgres.count("SELECT n FROM " + shared + " WHERE id = $1", row)).as("updates of row %d", row)
          .isEqualTo(expected[(int) row]);
    }
    for (String key : perKey.keySet()) {
      List<Object> order = postgres.column("SELECT n FROM " + effects + " WHERE k = $1 ORDER BY seq", key);
      assertThat(order).as("commit order of key %s", key).isSorted().hasSize(perKey.get(key).get());
    }
    assertThat(deadlocksPerMessage.values()).as("no message deadlocks twice").allSatisfy(times -> assertThat(times).isEqualTo(1));
    // Each deadlock leaves its keys out of the parallel lanes for a while: at most about one per key, plus the
    // transactions in flight when it was detected; not a number that grows with the messages.
    assertThat(deadlocks).as("deadlocks (each cost deadlock_timeout)").isLessThanOrEqualTo(KEYS + lanes);
  }

  /** {@code KEYS / 2} keys with the prefix that go to {@code lane} of two lanes (any lane when negative). */
  private static List<String> keysOnLane(int lane, String prefix) {
    List<String> keys = new ArrayList<>();
    for (int i = 0; keys.size() < KEYS / 2; i++) {
      String key = prefix + "-" + i;
      if (lane < 0 || Math.floorMod(key.hashCode(), 2) == lane) {
        keys.add(key);
      }
    }
    return keys;
  }

  private static boolean isDeadlock(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof R2dbcException r2dbc && "40P01".equals(r2dbc.getSqlState())) {
        return true;
      }
    }
    return false;
  }

  /** PostgreSQL's count of deadlocks in the test database, shared with whatever else runs on it. */
  private long databaseDeadlocks() {
    return postgres.count("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()");
  }
}
