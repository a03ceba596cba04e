package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.GracefulShutdown;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.MessageMetadata;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.ShutdownReport;
import dev.idem.kafka.testing.KafkaService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * A graceful stop of a Kafka consumer against the real broker and PostgreSQL: the offsets of the
 * messages completed during the grace period are committed by the time the source is closed, and
 * the next consumer of the group processes the rest, each message once. The handler writes the
 * message's metadata, so the same run checks what {@link MessageMetadata} shows on Kafka.
 */
class KafkaGracefulShutdownIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final int PARTITIONS = 2;
  private static final int MESSAGES = 120;

  /** Records the effect with the metadata the handler sees, then lingers inside the transaction. */
  private static Handler<String> metadataHandler(Scenario s, Duration linger) {
    return (payload, tx) -> {
      MessageMetadata m = tx.metadata();
      return tx.sql("INSERT INTO " + s.table + "_meta (message_id, topic, part, off, k, trace, attempt) "
          + "VALUES ($1, $2, $3, $4, $5, $6, $7)")
          .bind(0, m.messageId())
          .bind(1, m.broker().get(MessageMetadata.KAFKA_TOPIC))
          .bind(2, Integer.parseInt(m.broker().get(MessageMetadata.KAFKA_PARTITION)))
          .bind(3, Long.parseLong(m.broker().get(MessageMetadata.KAFKA_OFFSET)))
          .bind(4, m.key().orElse("<none>"))
          .bind(5, m.header("trace").orElse("<none>"))
          .bind(6, m.deliveryAttempt())
          .execute()
          .then(Mono.delay(linger));
    };
  }

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 8})
  void stopCommitsTheOffsetsCompletedDuringGraceAndTheNextConsumerAppliesTheRestOnce(int maxBatchSize) {
    try (Scenario s = new Scenario("graceful", PARTITIONS)) {
      s.pg.execute("CREATE TABLE " + s.table + "_meta (message_id text NOT NULL, topic text NOT NULL, part int NOT NULL, "
          + "off bigint NOT NULL, k text NOT NULL, trace text NOT NULL, attempt int NOT NULL)");
      try {
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < MESSAGES; i++) {
          ProducerRecord<byte[], byte[]> r = KafkaService.record(s.topic, i % PARTITIONS, "key-" + i, "msg-" + i, "payload-" + i);
          r.headers().add("trace", ("t-" + i).getBytes(StandardCharsets.UTF_8));
          records.add(r);
        }
        s.kafka.sendAll(records);
        // Per partition in order, so the acknowledged offsets of a partition are contiguous and its
        // committed offset must equal the number of its messages applied.
        IdempotentConsumer.Builder<String> builder = IdempotentConsumer.<String>named(s.consumer).inbox(s.inbox)
            .concurrency(PARTITIONS).prefetch(16).ordering(Ordering.BY_PARTITION).maxBatchSize(maxBatchSize);
        // No periodic or size-triggered commits: only the stop commits.
        KafkaSourceOptions<String> options = s.options().commitInterval(Duration.ofHours(1)).commitBatchSize(1_000_000).build();

        GracefulShutdown shutdown = GracefulShutdown.create();
        List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
        AtomicBoolean completed = new AtomicBoolean();
        ShutdownReport report;
        try (KafkaSource<String> source = KafkaSource.create(options)) {
          builder.handler(metadataHandler(s, Duration.ofMillis(150))).build()
              .process(source.receive(), shutdown)
              .subscribe(outcomes::add, error -> {}, () -> completed.set(true));
          await().atMost(TIMEOUT).until(() -> outcomes.size() >= 6);
          report = shutdown.stop(Duration.ofSeconds(30)).block(TIMEOUT);
        }
        // The source is closed: the commits of the stop are done.
        Map<Integer, Long> committed = s.committed();

        assertThat(completed.get()).isTrue();
        assertThat(report.abandonedInFlight()).isZero();
        assertThat(report.withinGracePeriod()).isTrue();
        assertThat(report.completedInFlight()).isPositive();
        Map<Integer, Long> applied = appliedPerPartition(s);
        assertThat(applied.values().stream().mapToLong(Long::longValue).sum()).isEqualTo(outcomes.size());
        assertThat(outcomes.size()).isLessThan(MESSAGES);
        for (int p = 0; p < PARTITIONS; p++) {
          assertThat(committed.getOrDefault(p, 0L)).as("committed offset of partition %d", p)
              .isEqualTo(applied.getOrDefault(p, 0L));
        }

        // The next consumer of the group processes the rest.
        try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
          Disposable running = builder.handler(metadataHandler(s, Duration.ZERO)).build().process(source.receive()).subscribe();
          try {
            Map<Integer, Long> end = s.end();
            await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(300))
                .untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
          } finally {
            running.dispose();
          }
        }
        assertThat(s.pg.count("SELECT count(*) FROM " + s.table + "_meta")).isEqualTo(MESSAGES);
        assertThat(s.pg.count("SELECT count(DISTINCT message_id) FROM " + s.table + "_meta")).isEqualTo(MESSAGES);
        // The metadata the handler saw is the record's.
        for (int i = 0; i < MESSAGES; i++) {
          List<Map<String, Object>> rows = s.pg.query(
              "SELECT topic, part, k, trace, attempt FROM " + s.table + "_meta WHERE message_id = $1",
              "msg-" + i);
          assertThat(rows).hasSize(1);
          assertThat(rows.get(0)).containsEntry("topic", s.topic).containsEntry("part", i % PARTITIONS)
              .containsEntry("k", "key-" + i).containsEntry("trace", "t-" + i).containsEntry("attempt", 1);
        }
        // Offsets are the records' own: per partition 0..n-1, each once.
        for (int p = 0; p < PARTITIONS; p++) {
          List<Object> offsets = s.pg.column("SELECT off FROM " + s.table + "_meta WHERE part = $1 ORDER BY off", p);
          List<Object> expected = new ArrayList<>();
          for (long o = 0; o < MESSAGES / PARTITIONS; o++) {
            expected.add(o);
          }
          assertThat(offsets).isEqualTo(expected);
        }
      } finally {
        s.pg.execute("DROP TABLE IF EXISTS " + s.table + "_meta");
      }
    }
  }

  private static Map<Integer, Long> appliedPerPartition(Scenario s) {
    Map<Integer, Long> applied = new HashMap<>();
    for (Map<String, Object> row : s.pg.query("SELECT part, count(*) AS n FROM " + s.table + "_meta GROUP BY part")) {
      applied.put((Integer) row.get("part"), (Long) row.get("n"));
    }
    return applied;
  }
}
