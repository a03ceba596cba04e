package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.GetResponse;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.outbox.RelayOrdering;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.OutboxTesting;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** The outbox relay with the RabbitMQ publisher on the real broker and database. */
class RabbitOutboxPublisherIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  private final RabbitService rabbit = RabbitService.get();
  private final PostgresService postgres = PostgresService.get();
  private final List<Disposable> running = new ArrayList<>();
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private ConnectionPool pool;
  private PostgresOutbox outbox;
  private String queue;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(8);
    outbox = PostgresOutbox.create(pool, PostgresService.uniqueName("outbox"));
    outbox.createSchemaIfAbsent().block(TIMEOUT);
    queue = PostgresService.uniqueName("outbox_dest");
  }

  @AfterEach
  void tearDown() throws Exception {
    running.forEach(Disposable::dispose);
    for (AutoCloseable c : closeables) {
      c.close();
    }
    RabbitTopology.delete(rabbit.admin(), queue);
    postgres.execute("DROP TABLE IF EXISTS " + outbox.table());
    pool.dispose();
  }

  private RabbitOutboxPublisher publisher() {
    RabbitOutboxPublisher publisher = RabbitOutboxPublisher.builder(rabbit.uri())
        .connectionName(PostgresService.uniqueName("relay")).build();
    closeables.add(publisher);
    return publisher;
  }

  private void start(OutboxRelay relay) {
    running.add(relay.run().subscribe(m -> {}, e -> System.err.println("relay failed: " + e)));
  }

  private List<String> write(int n) {
    return OutboxTesting.write(pool, outbox, IntStream.range(0, n)
        .mapToObj(i -> OutboxRecord.to(queue).key("k" + (i % 10)).payload("notification " + i).header("kind", "refund").build())
        .toList());
  }

  private long rows(String status) {
    return OutboxTesting.rows(postgres, outbox, status);
  }

  /** Takes every message off the queue: it holds exactly what the relay sent, since nothing else publishes to it. */
  private Map<String, Long> drainedCountsById() {
    return rabbit.drain(queue).stream().collect(Collectors.groupingBy(r -> r.getProps().getMessageId(), Collectors.counting()));
  }

  @Test
  void relayedRowsArriveOnceEachWithTheRowIdAsAmqpMessageIdAfterTheBrokerConfirmed() throws Exception {
    RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);
    List<String> ids = write(300);

    start(OutboxRelay.builder(outbox, publisher()).ordering(RelayOrdering.UNORDERED).batchSize(100).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 300);
    List<GetResponse> messages = rabbit.drain(queue);
    assertThat(messages).hasSize(300);
    assertThat(messages).extracting(m -> m.getProps().getMessageId()).containsExactlyInAnyOrderElementsOf(ids);
    GetResponse first = messages.stream().filter(m -> m.getProps().getMessageId().equals(ids.get(0))).findFirst().orElseThrow();
    assertThat(new String(first.getBody(), StandardCharsets.UTF_8)).isEqualTo("notification 0");
    assertThat(first.getProps().getDeliveryMode()).isEqualTo(2);
    assertThat(first.getProps().getHeaders()).containsKey("kind");
    assertThat(first.getProps().getHeaders().get("kind").toString()).isEqualTo("refund");
  }

  @Test
  void unroutableRowsFailUntilTheirQueueExistsThenAreDeliveredOnce() throws Exception {
    List<String> ids = write(3);
    start(OutboxRelay.builder(outbox, publisher()).backoff(Duration.ofMillis(50), Duration.ofMillis(200)).maxAttempts(1_000)
        .pollInterval(Duration.ofMillis(200)).build());

    // The broker returns every attempt (mandatory, no queue bound): recorded on the rows, nothing marked sent.
    await().atMost(TIMEOUT).until(() -> postgres.count("SELECT min(attempts) FROM " + outbox.table()) >= 3);
    assertThat(rows("SENT")).isZero();
    assertThat(postgres.column("SELECT DISTINCT last_error FROM " + outbox.table())).singleElement()
        .satisfies(e -> assertThat((String) e).contains("unroutable"));

    RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 3);
    assertThat(drainedCountsById()).containsOnlyKeys(ids).allSatisfy((id, count) -> assertThat(count).isEqualTo(1L));
  }

  @Test
  void rowParkedBelowTheFailureCountIsResentWithItsIdAfterTheQueueIsDeclared() throws Exception {
    List<String> ids = write(1);
    start(OutboxRelay.builder(outbox, publisher()).backoff(Duration.ofMillis(20), Duration.ofMillis(50)).maxAttempts(2)
        .pollInterval(Duration.ofMillis(200)).build());

    await().atMost(TIMEOUT).until(() -> rows("PARKED") == 1);
    assertThat(outbox.parked(10).collectList().block(TIMEOUT)).singleElement()
        .satisfies(p -> assertThat(p.lastError()).contains("unroutable"));

    RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);
    assertThat(outbox.resend(ids.get(0)).block(TIMEOUT)).isEqualTo(1);

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 1);
    assertThat(drainedCountsById()).containsExactly(Map.entry(ids.get(0), 1L));
  }

  @Test
  void twoRelaysOnOneTableDeliverEveryRowExactlyOnceCountedPerIdAtTheBroker() throws Exception {
    RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);
    List<String> ids = write(2_000);
    ConnectionPool otherPool = postgres.pool(4);
    closeables.add(otherPool::dispose);
    PostgresOutbox sameTable = PostgresOutbox.create(otherPool, outbox.table());

    start(OutboxRelay.builder(outbox, publisher()).name("a").ordering(RelayOrdering.UNORDERED).workers(2).batchSize(50).build());
    start(
        OutboxRelay.builder(sameTable, publisher()).name("b").ordering(RelayOrdering.UNORDERED).workers(2).batchSize(50).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 2_000);
    Map<String, Long> counts = drainedCountsById();
    assertThat(counts).hasSize(2_000).containsOnlyKeys(ids);
    assertThat(counts.values()).allSatisfy(count -> assertThat(count).isEqualTo(1L));
  }

  @Test
  void threeRelaysWithSeveralWorkersEachPublishEveryKeysRowsInRowOrderAndEachIdOnceWhileFailedAttemptsAreRetried()
      throws Exception {
    RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);
    ConnectionPool otherPool = postgres.pool(8);
    closeables.add(otherPool::dispose);
    PostgresOutbox sameTable = PostgresOutbox.create(otherPool, outbox.table());
    start(byKeyRelay(outbox, publisher(), "a", 2));
    start(byKeyRelay(sameTable, publisher(), "b", 2));
    start(byKeyRelay(sameTable, publisher(), "c", 3));

    // One transaction, so the rows' order is their commit order; every relay wakes on its notification.
    List<String> ids = OutboxTesting.write(pool, outbox, IntStream.range(0, 600)
        .mapToObj(i -> OutboxRecord.to(queue).key("k" + (i % 7)).payload(Integer.toString(i)).build()).toList());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 600);
    List<GetResponse> messages = rabbit.drain(queue);
    assertThat(messages).extracting(m -> m.getProps().getMessageId()).containsExactlyInAnyOrderElementsOf(ids);
    Map<String, List<Integer>> rowsByKey = new TreeMap<>();
    for (GetResponse m : messages) {
      int row = Integer.parseInt(new String(m.getBody(), StandardCharsets.UTF_8));
      rowsByKey.computeIfAbsent("k" + (row % 7), k -> new ArrayList<>()).add(row);
    }
    assertThat(rowsByKey).hasSize(7)
        .allSatisfy((key, rows) -> assertThat(rows).as("rows of %s in arrival order", key).isSorted());
    assertThat(postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE attempts = 2")).isEqualTo(120);
  }

  /** A {@code BY_KEY} relay in batches of 20 whose publisher fails the first attempt of every fifth row, retried 20 ms later. */
  private static OutboxRelay byKeyRelay(PostgresOutbox table, OutboxPublisher publisher, String name, int workers) {
    Duration retry = Duration.ofMillis(20);
    return OutboxRelay.builder(table, failingFirstAttemptOfEveryFifthRow(publisher)).name(name).ordering(RelayOrdering.BY_KEY)
        .workers(workers).batchSize(20).backoff(retry, retry).build();
  }

  /** Fails the first attempt of rows 0, 5, 10, ...: their key's later rows must wait for the retry. */
  private static OutboxPublisher failingFirstAttemptOfEveryFifthRow(OutboxPublisher publisher) {
    return message -> message.attempt() == 1 && Integer.parseInt(new String(message.payload(), StandardCharsets.UTF_8)) % 5 == 0
        ? Mono.error(
            new IllegalStateException("first attempt of row " + new String(message.payload(), StandardCharsets.UTF_8) + " fails"))
        : publisher.publish(message);
  }
}
