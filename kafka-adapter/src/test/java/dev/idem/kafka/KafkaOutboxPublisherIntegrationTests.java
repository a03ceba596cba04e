package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.outbox.RelayOrdering;
import dev.idem.testing.OutboxTesting;
import dev.idem.testing.PostgresService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** The outbox relay with the Kafka publisher on the real broker and database. */
class KafkaOutboxPublisherIntegrationTests {

  private static final Duration TIMEOUT = KafkaService.timeout();

  private final List<Disposable> running = new ArrayList<>();
  private Scenario scenario;
  private PostgresOutbox outbox;
  private KafkaOutboxPublisher publisher;

  @BeforeEach
  void setUp() {
    scenario = new Scenario("outbox", 3);
    outbox = PostgresOutbox.create(scenario.pool, PostgresService.uniqueName("outbox"));
    outbox.createSchemaIfAbsent().block(TIMEOUT);
    publisher = KafkaOutboxPublisher.create(scenario.kafka.bootstrapServers());
  }

  @AfterEach
  void tearDown() {
    running.forEach(Disposable::dispose);
    publisher.close();
    scenario.pg.execute("DROP TABLE IF EXISTS " + outbox.table());
    scenario.close();
  }

  private void start(OutboxRelay relay) {
    running.add(relay.run().subscribe(m -> {}, e -> System.err.println("relay failed: " + e)));
  }

  private long rows(String status) {
    return OutboxTesting.rows(scenario.pg, outbox, status);
  }

  private List<ConsumerRecord<byte[], byte[]>> readAll(int expected) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, scenario.kafka.bootstrapServers());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, scenario.group + "-reader");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
        new ByteArrayDeserializer())) {
      consumer.subscribe(List.of(scenario.topic));
      long deadline = System.nanoTime() + TIMEOUT.toNanos();
      while (records.size() < expected && System.nanoTime() < deadline) {
        consumer.poll(Duration.ofMillis(500)).forEach(records::add);
      }
    }
    return records;
  }

  private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
    return new String(record.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }

  @Test
  void relayedRowsReachTheTopicWithTheirKeyInKeyOrderAndTheRowIdAsMessageIdHeader() {
    List<String> ids = OutboxTesting.write(scenario.pool, outbox, IntStream.range(0, 300)
        .mapToObj(i -> OutboxRecord.to(scenario.topic).key("customer-" + (i % 10)).payload(Integer.toString(i))
            .header("kind", "refund").build())
        .toList());

    start(OutboxRelay.builder(outbox, publisher).ordering(RelayOrdering.BY_KEY).workers(2).batchSize(50).build());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 300);
    List<ConsumerRecord<byte[], byte[]>> records = readAll(300);
    assertThat(records).hasSize(300);
    assertThat(records).extracting(r -> header(r, "message-id")).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(records).allSatisfy(r -> assertThat(header(r, "kind")).isEqualTo("refund"));
    Map<String, List<Integer>> valuesByKey = new HashMap<>();
    Map<String, Integer> partitionByKey = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      String key = new String(r.key(), StandardCharsets.UTF_8);
      valuesByKey.computeIfAbsent(key, k -> new ArrayList<>())
          .add(Integer.parseInt(new String(r.value(), StandardCharsets.UTF_8)));
      assertThat(partitionByKey.computeIfAbsent(key, k -> r.partition())).isEqualTo(r.partition());
    }
    assertThat(valuesByKey).hasSize(10);
    valuesByKey.values().forEach(values -> assertThat(values).isSorted().hasSize(30));
  }

  @Test
  void rowsTheRelaySendsTwiceAreAppliedOnceByAnIdempotentConsumerDownstream() {
    List<String> ids = OutboxTesting.write(scenario.pool, outbox, IntStream.range(0, 100)
        .mapToObj(i -> OutboxRecord.to(scenario.topic).key("k" + (i % 7)).payload("notification " + i).build()).toList());
    start(OutboxRelay.builder(outbox, publisher).ordering(RelayOrdering.UNORDERED).build());
    await().atMost(TIMEOUT).until(() -> rows("SENT") == 100);
    // What a relay crash between publish and mark leaves behind: the rows are pending again and go out a second time, same ids.
    scenario.pg.execute("UPDATE " + outbox.table() + " SET status = 'PENDING', sent_at = NULL");
    await().atMost(TIMEOUT)
        .until(() -> rows("SENT") == 100 && scenario.end().values().stream().mapToLong(Long::longValue).sum() == 200);

    Map<Outcome.Status, AtomicInteger> outcomes = new ConcurrentHashMap<>();
    IdempotentConsumer<String> downstream = IdempotentConsumer.<String>named(scenario.consumer).inbox(scenario.inbox)
        .handler(scenario.recordingHandler()).ordering(Ordering.BY_KEY).build();
    running.add(KafkaSource.create(scenario.options().build()).receive().transform(downstream::process)
        .subscribe(o -> outcomes.computeIfAbsent(o.status(), s -> new AtomicInteger()).incrementAndGet()));

    await().atMost(TIMEOUT).until(() -> outcomes.values().stream().mapToInt(AtomicInteger::get).sum() == 200);
    assertThat(outcomes.get(Outcome.Status.PROCESSED)).hasValue(100);
    assertThat(outcomes.get(Outcome.Status.DUPLICATE)).hasValue(100);
    assertThat(scenario.effects()).isEqualTo(100);
    assertThat(scenario.pg.column("SELECT DISTINCT message_id FROM " + scenario.table)).containsExactlyInAnyOrderElementsOf(ids);
  }

  @Test
  void threeRelaysWithSeveralWorkersEachPublishEveryKeysRowsInRowOrderAndEachIdOnceWhileFailedAttemptsAreRetried() {
    List<KafkaOutboxPublisher> publishers = List.of(KafkaOutboxPublisher.create(scenario.kafka.bootstrapServers()),
        KafkaOutboxPublisher.create(scenario.kafka.bootstrapServers()));
    publishers.forEach(p -> running.add(p::close));
    start(byKeyRelay(outbox, publisher, "a", 2));
    start(byKeyRelay(outbox, publishers.get(0), "b", 2));
    start(byKeyRelay(outbox, publishers.get(1), "c", 3));

    // One transaction, so the rows' order is their commit order; every relay wakes on its notification.
    List<String> ids = OutboxTesting.write(scenario.pool, outbox, IntStream.range(0, 300)
        .mapToObj(i -> OutboxRecord.to(scenario.topic).key("k" + (i % 7)).payload(Integer.toString(i)).build()).toList());

    await().atMost(TIMEOUT).until(() -> rows("SENT") == 300);
    List<ConsumerRecord<byte[], byte[]>> records = readAll(300);
    assertThat(records).extracting(r -> header(r, "message-id")).containsExactlyInAnyOrderElementsOf(ids);
    // A key's records share a partition, and a partition is read in the order the broker appended them.
    Map<String, List<Integer>> rowsByKey = new TreeMap<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      rowsByKey.computeIfAbsent(new String(r.key(), StandardCharsets.UTF_8), k -> new ArrayList<>())
          .add(Integer.parseInt(new String(r.value(), StandardCharsets.UTF_8)));
    }
    assertThat(rowsByKey).hasSize(7)
        .allSatisfy((key, rows) -> assertThat(rows).as("rows of %s in arrival order", key).isSorted());
    assertThat(scenario.pg.count("SELECT count(*) FROM " + outbox.table() + " WHERE attempts = 2")).isEqualTo(60);
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
