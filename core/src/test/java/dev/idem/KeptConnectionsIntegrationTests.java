package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The default transaction runner keeps clean connections between transactions instead of
 * handing each back to the pool; they must still go back when idle or when someone waits.
 */
class KeptConnectionsIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private final List<ConnectionPool> pools = new CopyOnWriteArrayList<>();
  private PostgresInbox inbox;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text PRIMARY KEY)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects);
    if (inbox != null) {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
    pools.forEach(ConnectionPool::dispose);
  }

  private ConnectionPool pool(int size) {
    ConnectionPool pool = postgres.pool(size);
    pools.add(pool);
    inbox = PostgresInbox.create(pool, inbox == null ? PostgresService.uniqueName("inbox") : inbox.table());
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    return pool;
  }

  private IdempotentConsumer<String> consumer(int concurrency) {
    Handler<String> effect = (p, tx) -> tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId())
        .execute();
    return IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(effect).concurrency(concurrency)
        .ordering(Ordering.UNORDERED).build();
  }

  @Test
  void keptConnectionsGoBackToThePoolOnceTheConsumerIsIdle() {
    ConnectionPool pool = pool(4);
    List<TestDelivery<String>> deliveries = IntStream.range(0, 200).mapToObj(i -> TestDelivery.of("m-" + i, "x")).toList();

    List<Outcome<String>> outcomes = consumer(4).process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(200).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    await().atMost(TIMEOUT).until(() -> pool.getMetrics().orElseThrow().acquiredSize() == 0);
    assertThat(pool.getMetrics().orElseThrow().idleSize()).isPositive();
  }

  @Test
  void aCallerWaitingForThePoolGetsTheConnectionOfABusyConsumer() {
    ConnectionPool pool = pool(1);
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    // A steady stream: the consumer's only connection is never idle long enough to go back by itself.
    Disposable running = consumer(1)
        .process(
            Flux.range(0, 1_000_000).concatMap(i -> Mono.just(TestDelivery.of("m-" + i, "x")).delayElement(Duration.ofMillis(5))))
        .subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).until(() -> outcomes.size() >= 20);

      Connection borrowed = Mono.from(pool.create()).block(TIMEOUT);

      assertThat(borrowed).isNotNull();
      int before = outcomes.size();
      Mono.from(borrowed.close()).block(TIMEOUT);
      await().atMost(TIMEOUT).until(() -> outcomes.size() > before + 20);
      assertThat(outcomes).allSatisfy(o -> assertThat(o.status()).isEqualTo(Outcome.Status.PROCESSED));
    } finally {
      running.dispose();
    }
  }
}
