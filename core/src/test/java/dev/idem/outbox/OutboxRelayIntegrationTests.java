package dev.idem.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.micrometer.MicrometerOutboxMetrics;
import dev.idem.testing.PostgresService;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The relay's own behaviour against a real PostgreSQL, with a destination in memory. */
class OutboxRelayIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private final List<Disposable> running = new ArrayList<>();
  private final List<ConnectionPool> pools = new ArrayList<>();
  private ConnectionPool pool;
  private PostgresOutbox outbox;

  @BeforeEach
  void setUp() {
    pool = pool(8);
    outbox = PostgresOutbox.create(pool, PostgresService.uniqueName("outbox"));
    outbox.createSchemaIfAbsent().block(TIMEOUT);
  }

  @AfterEach
  void tearDown() {
    running.forEach(Disposable::dispose);
    postgres.execute("DROP TABLE IF EXISTS " + outbox.table());
    pools.forEach(ConnectionPool::dispose);
  }

  private ConnectionPool pool(int size) {
    ConnectionPool p = postgres.pool(size);
    pools.add(p);
    return p;
  }

  /** Writes rows in one committed transaction, as a handler would. */
  static List<String> write(ConnectionPool pool, PostgresOutbox outbox, List<OutboxRecord> records) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.beginTransaction())
            .thenMany(Flux.fromIterable(records).concatMap(r -> outbox.add(c, r)))
            .collectList()
            .flatMap(ids -> Mono.from(c.commitTransaction()).thenReturn(ids)),
        Connection::close).block(TIMEOUT);
  }

  private List<String> writeKeyed(int rows, int keys) {
    return write(pool, outbox, IntStream.range(0, rows)
        .mapToObj(i -> OutboxRecord.to("dest").key("k" + (i % keys)).payload(Integer.toString(i)).build()).toList());
  }

  private Disposable start(OutboxRelay relay) {
    Disposable d = relay.run().subscribe(m -> {}, e -> System.err.println("relay failed: " + e));
    running.add(d);
    return d;
  }

  private long rows(String status) {
    return postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE status = $1", status);
  }

  /** The outbox's only row was sent, confirmed once, after {@code attempts} attempts whose last error is recorded. */
  private void assertSentOnceAfter(String id, RecordingPublisher destination, int attempts, String lastError) {
    await().atMost(TIMEOUT).until(() -> rows("SENT") == 1);
    assertThat(destination.attempts(id)).isEqualTo(attempts);
    assertThat(destination.confirmationsById.get(id).get()).isEqualTo(1);
    Map<String, Object> row = postgres.query("SELECT attempts, last_error FROM " + outbox.table()).get(0);
    assertThat(row.get("attempts")).isEqualTo(attempts);
    assertThat((String) row.get("last_error")).contains(lastError);
  }

  @Test
  void everyRowIsPublishedOnceWithItsIdAndMarkedSentAfterConfirmation() {
    List<String> ids = writeKeyed(300, 30);
    RecordingPublisher destination = new RecordingPublisher();

    start(OutboxRelay.builder(outbox, destination).ordering(RelayOrdering.UNORDERED).batchSize(50).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 300);
    assertThat(destination.confirmationsById.keySet()).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(destination.confirmationsById.values()).allSatisfy(n -> assertThat(n.get()).isEqualTo(1));
    assertThat(postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE attempts = 1 AND sent_at IS NOT NULL"))
        .isEqualTo(300);
    assertThat(destination.confirmed.get(0).payload()).isNotEmpty();
  }

  @Test
  void byKeyRowsOfOneKeyAreSentInSequenceOrderOneAtATimeEvenWithSeveralWorkers() {
    writeKeyed(400, 8);
    RecordingPublisher destination = new RecordingPublisher().latency(Duration.ofMillis(3));

    start(OutboxRelay.builder(outbox, destination).ordering(RelayOrdering.BY_KEY).workers(3).batchSize(20).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 400);
    Map<String, List<Long>> seqsByKey = destination.confirmed.stream()
        .collect(Collectors.groupingBy(OutboxMessage::key, Collectors.mapping(OutboxMessage::seq, Collectors.toList())));
    assertThat(seqsByKey).hasSize(8);
    seqsByKey.values().forEach(seqs -> assertThat(seqs).isSorted().hasSize(50));
    assertThat(destination.mostInFlightForOneKey.get()).isEqualTo(1);
  }

  /**
   * What {@link RelayOrdering#BY_KEY} documents for writers of one key that overlap: a row is seen
   * at its commit, so the row of the transaction that commits first goes first although its seq is
   * larger; the relay never waits for a transaction it cannot see.
   */
  @Test
  void byKeyRowsOfOneKeyFromOverlappingTransactionsGoInCommitOrderNotSequenceOrder() {
    RecordingPublisher destination = new RecordingPublisher();
    start(OutboxRelay.builder(outbox, destination).ordering(RelayOrdering.BY_KEY).build());
    Connection open = Mono.from(pool.create()).block(TIMEOUT);
    try {
      Mono.from(open.beginTransaction()).then(outbox.add(open, OutboxRecord.to("dest").key("k").payload("added first").build()))
          .block(TIMEOUT);
      write(pool, outbox, List.of(OutboxRecord.to("dest").key("k").payload("added second").build()));
      await().atMost(TIMEOUT).until(() -> destination.confirmed.size() == 1);
      Mono.from(open.commitTransaction()).block(TIMEOUT);
    } finally {
      Mono.from(open.close()).block(TIMEOUT);
    }

    await().atMost(TIMEOUT).until(() -> destination.confirmed.size() == 2);
    assertThat(destination.confirmed).extracting(m -> new String(m.payload(), java.nio.charset.StandardCharsets.UTF_8))
        .containsExactly("added second", "added first");
    assertThat(destination.confirmed.get(0).seq()).isGreaterThan(destination.confirmed.get(1).seq());
  }

  @Test
  void committedRowWakesTheListeningRelayLongBeforeItsPollInterval() {
    RecordingPublisher destination = new RecordingPublisher();
    start(OutboxRelay.builder(outbox, destination).pollInterval(Duration.ofMinutes(10)).build());
    // The listening session's last statement is its LISTEN.
    await().atMost(TIMEOUT).until(() -> postgres.count(
        "SELECT count(*) FROM pg_stat_activity WHERE query = $1", "LISTEN " + outbox.channel()) == 1);
    // The relay's first round (at start) found nothing; from now on only a notification can wake it within ten minutes.
    await().atMost(TIMEOUT).until(() -> destination.attemptsById.isEmpty());

    List<String> ids = write(pool, outbox, List.of(OutboxRecord.to("dest").payload("wake up").build()));

    await().atMost(Duration.ofSeconds(30)).until(() -> destination.confirmationsById.containsKey(ids.get(0)));
    await().atMost(TIMEOUT).until(() -> rows("SENT") == 1);
  }

  @Test
  void destinationFailingThreeTimesThenRecoveringGetsTheMessageOnceWithAttemptsAndLastErrorRecorded() {
    List<String> ids = write(pool, outbox, List.of(OutboxRecord.to("dest").key("a").payload("x").build()));
    RecordingPublisher destination = new RecordingPublisher()
        .failWhen(m -> m.attempt() <= 3 ? new IOException("destination down (attempt " + m.attempt() + ")") : null);

    start(
        OutboxRelay.builder(outbox, destination).backoff(Duration.ofMillis(20), Duration.ofMillis(100)).maxAttempts(10).build());

    assertSentOnceAfter(ids.get(0), destination, 4, "destination down (attempt 3)");
  }

  @Test
  void aPublishWithoutConfirmationWithinThePublishTimeoutFailsItsAttemptAndIsSentAgain() {
    List<String> ids = write(pool, outbox, List.of(OutboxRecord.to("dest").key("a").payload("x").build()));
    RecordingPublisher destination = new RecordingPublisher().hangWhen(m -> m.attempt() == 1);

    start(OutboxRelay.builder(outbox, destination).publishTimeout(Duration.ofMillis(300))
        .backoff(Duration.ofMillis(20), Duration.ofMillis(100)).maxAttempts(10).build());

    assertSentOnceAfter(ids.get(0), destination, 2, "no confirmation within the publish timeout of PT0.3S");
  }

  @Test
  void rowFailingPastTheLimitIsParkedVisibleAndCountedHoldsBackItsKeyAndIsSentAgainAfterResend() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    List<String> ids = write(pool, outbox, List.of(
        OutboxRecord.to("dest").key("customer-1").payload("first").build(),
        OutboxRecord.to("dest").key("customer-1").payload("second").build(),
        OutboxRecord.to("dest").key("customer-2").payload("other key").build()));
    AtomicReference<Boolean> destinationFixed = new AtomicReference<>(false);
    RecordingPublisher destination = new RecordingPublisher()
        .failWhen(
            m -> m.id().equals(ids.get(0)) && !destinationFixed.get() ? new IOException("rejected by the destination") : null);

    start(OutboxRelay.builder(outbox, destination).backoff(Duration.ofMillis(20), Duration.ofMillis(50)).maxAttempts(3)
        .pollInterval(Duration.ofMillis(200)).statsInterval(Duration.ofMillis(100))
        .metrics(new MicrometerOutboxMetrics(registry, "test")).build());

    await().atMost(TIMEOUT).until(() -> rows("PARKED") == 1 && rows("SENT") == 1);
    List<ParkedMessage> parked = outbox.parked(10).collectList().block(TIMEOUT);
    assertThat(parked).singleElement().satisfies(p -> {
      assertThat(p.messageId()).isEqualTo(ids.get(0));
      assertThat(p.attempts()).isEqualTo(3);
      assertThat(p.lastError()).contains("rejected by the destination");
    });
    assertThat(destination.attempts(ids.get(0))).isEqualTo(3);
    await().atMost(TIMEOUT).until(() -> registry.get(MicrometerOutboxMetrics.PARKED).gauge().value() == 1.0);
    assertThat(registry.get(MicrometerOutboxMetrics.PARKED_TOTAL).counter().count()).isEqualTo(1.0);
    assertThat(registry.get(MicrometerOutboxMetrics.FAILED).counter().count()).isEqualTo(3.0);
    assertThat(registry.get(MicrometerOutboxMetrics.UNSENT).gauge().value()).isEqualTo(1.0); // "second", held back
    // The other key went on; the parked row's key waits behind it.
    assertThat(destination.confirmationsById).containsOnlyKeys(ids.get(2));

    destinationFixed.set(true);
    assertThat(outbox.resendParked().block(TIMEOUT)).isEqualTo(1);

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 3);
    assertThat(destination.confirmed).extracting(OutboxMessage::id).containsExactly(ids.get(2), ids.get(0), ids.get(1));
    assertThat(registry.get(MicrometerOutboxMetrics.PUBLISHED).counter().count()).isEqualTo(3.0);
  }

  @Test
  void twoRelaysOnOneTablePublishEveryRowExactlyOnceBetweenThem() {
    int n = 1_000;
    List<String> ids = writeKeyed(n, 50);
    RecordingPublisher destination = new RecordingPublisher().latency(Duration.ofMillis(2));
    PostgresOutbox sameTableOtherPool = PostgresOutbox.create(pool(4), outbox.table());

    start(OutboxRelay.builder(outbox, destination).name("relay-a").ordering(RelayOrdering.UNORDERED).workers(2).batchSize(25)
        .build());
    start(OutboxRelay.builder(sameTableOtherPool, destination).name("relay-b").ordering(RelayOrdering.UNORDERED).workers(2)
        .batchSize(25).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == n);
    assertThat(destination.confirmationsById).hasSize(n).containsOnlyKeys(ids);
    assertThat(destination.confirmationsById.values()).allSatisfy(count -> assertThat(count.get()).isEqualTo(1));
    assertThat(destination.confirmed).hasSize(n);
  }

  @Test
  void jvmErrorInThePublisherEndsTheRelayAndLeavesItsRowsPending() {
    write(pool, outbox, List.of(OutboxRecord.to("dest").payload("x").build()));
    OutboxPublisher broken = message -> {
      throw new OutOfMemoryError("simulated");
    };

    Throwable error = OutboxRelay.builder(outbox, broken).build().run().then().materialize().block(TIMEOUT).getThrowable();

    assertThat(error).isInstanceOf(OutOfMemoryError.class);
    assertThat(rows("PENDING")).isEqualTo(1);
    assertThat(postgres.count("SELECT attempts FROM " + outbox.table())).isZero();
  }
}
