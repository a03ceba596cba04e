package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A JVM error ({@link StackOverflowError}, {@link OutOfMemoryError}, {@link LinkageError}) raised by
 * the handler where Reactor would rethrow it up the database driver's thread instead of signalling
 * it: emitted after a write, or thrown by a mapping function over a query's rows. In every mode the
 * documented policy holds: the returned {@code Flux} ends with that error, nothing of the failing
 * message commits, and a new subscription applies every message exactly once.
 */
class JvmErrorPathsIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final RetryPolicy FAST = RetryPolicy.backoff(3, Duration.ofMillis(5))
      .withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(200));

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  /** Where the handler raises the error, after it wrote its effect. */
  enum Where {
    EMITTED_AFTER_A_WRITE, THROWN_MAPPING_A_QUERY_ROW, THROWN_IN_A_MAP_AFTER_A_WRITE
  }

  static List<Arguments> cases() {
    List<Arguments> all = new ArrayList<>();
    for (Where where : Where.values()) {
      for (String mode : List.of("per-message", "batch-handler-per-message", "batch-set-based")) {
        for (Function<String, Error> error : List.<Function<String, Error>>of(StackOverflowError::new, OutOfMemoryError::new)) {
          all.add(Arguments.of(where, mode, error));
        }
      }
    }
    return all;
  }

  private Mono<Void> write(Tx tx, String id) {
    return tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, id).execute().then();
  }

  private Mono<Void> effect(Tx tx, String id, Where where, Error error) {
    if (!id.equals("bad")) {
      return write(tx, id);
    }
    return switch (where) {
      case EMITTED_AFTER_A_WRITE -> write(tx, id).then(Mono.error(error));
      case THROWN_MAPPING_A_QUERY_ROW -> write(tx, id).thenMany(tx.sql("SELECT 1").map(row -> {
        throw error;
      })).then();
      case THROWN_IN_A_MAP_AFTER_A_WRITE -> tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, id).execute()
          .map(rows -> {
            throw error;
          }).then();
    };
  }

  private IdempotentConsumer<String> consumer(String mode, Function<String, Mono<Void>> perMessage,
      java.util.function.BiFunction<Tx, String, Mono<Void>> effect) {
    IdempotentConsumer.Builder<String> b = IdempotentConsumer.<String>named(consumer).inbox(inbox).retry(FAST)
        .transactionTimeout(Duration.ofSeconds(5)).concurrency(2).ordering(Ordering.UNORDERED);
    return switch (mode) {
      case "per-message" -> b.handler((p, tx) -> effect.apply(tx, tx.messageId())).build();
      case "batch-handler-per-message" -> b.maxBatchSize(16).handler((p, tx) -> effect.apply(tx, tx.messageId())).build();
      default -> b.maxBatchSize(16).batchHandler((items, tx) -> Flux.fromIterable(items)
          .concatMap(item -> effect.apply(tx, item.messageId())).then()).build();
    };
  }

  private static List<TestDelivery<String>> deliveries() {
    List<TestDelivery<String>> all = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      all.add(TestDelivery.of("g" + i, "p"));
    }
    all.add(5, TestDelivery.of("bad", "p"));
    return all;
  }

  @ParameterizedTest(name = "{0}, {1}, {2}")
  @MethodSource("cases")
  void aJvmErrorOfTheHandlerOnTheDriversThreadEndsTheStreamCommitsNothingOfItsMessageAndARestartAppliesEachOnce(
      Where where, String mode, Function<String, Error> errorOf) {
    Error error = errorOf.apply("test: raised by the handler of 'bad'");
    List<TestDelivery<String>> first = deliveries();
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    AtomicReference<Throwable> ended = new AtomicReference<>();

    consumer(mode, null, (tx, id) -> effect(tx, id, where, error))
        .process(Flux.<Delivery<String>>fromIterable(first).concatWith(Flux.never()))
        .doOnNext(outcomes::add)
        .onErrorResume(e -> {
          ended.set(e);
          return Mono.empty();
        })
        .blockLast(TIMEOUT);

    assertThat(ended.get()).as("the stream's error").isSameAs(error);
    TestDelivery<String> bad = first.get(5);
    assertThat(bad.ackCount()).isZero();
    assertThat(bad.deadLetter()).isNull();
    assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = 'bad'")).isZero();
    assertThat(postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE consumer = $1 AND message_id = 'bad'", consumer))
        .isZero();
    for (Outcome<String> o : outcomes) {
      assertThat(((TestDelivery<String>) o.delivery()).ackCount()).isEqualTo(1);
    }

    // The application restarts: every message comes again, the handler now works.
    List<TestDelivery<String>> again = deliveries();
    List<Outcome<String>> second = consumer(mode, null, this::write)
        .process(Flux.fromIterable(again)).collectList().block(TIMEOUT);
    assertThat(second).hasSize(11);
    for (TestDelivery<String> d : again) {
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1", d.id())).as("effects of %s", d.id())
          .isEqualTo(1);
      assertThat(d.ackCount()).isEqualTo(1);
    }
  }
}
