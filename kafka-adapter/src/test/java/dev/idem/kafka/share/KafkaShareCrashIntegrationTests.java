package dev.idem.kafka.share;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.kafka.testing.ConsumerProcess;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.ShareGroups;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Share-group consumers in processes of their own on a one-partition topic, as a team scales a
 * work queue past its partitions: both make progress, one is killed with SIGKILL in the middle of
 * its batches (no release, no commit, transactions cut off), a new one joins, and every message
 * is applied exactly once, with nothing left in the group. The killed consumer's records come
 * back when their acquisition lock runs out.
 */
class KafkaShareCrashIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(180);
  private static final Duration LOCK = Duration.ofSeconds(4);
  private static final int MESSAGES = 3_000;

  private final KafkaService kafka = KafkaService.get();
  private final PostgresService pg = PostgresService.get();
  private final List<Process> processes = new ArrayList<>();
  private String topic;
  private String group;
  private String consumerName;
  private String table;
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private Path log;

  @BeforeEach
  void setUp() throws Exception {
    String name = KafkaService.uniqueName("sharecrash");
    topic = name + "_topic";
    group = name + "_group";
    consumerName = name + "_consumer";
    table = name + "_effects";
    kafka.createTopic(topic, 1);
    ShareGroups.configure(kafka, group, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms",
        Long.toString(LOCK.toMillis())));
    pg.execute("CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, payload text NOT NULL)");
    pool = pg.pool(4);
    inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
    log = Paths.get("target", name + ".log");
    Files.createDirectories(log.getParent());
  }

  @AfterEach
  void tearDown() throws Exception {
    for (Process process : processes) {
      process.destroyForcibly();
      process.waitFor(30, TimeUnit.SECONDS);
    }
    pg.execute("DROP TABLE IF EXISTS " + table, "DELETE FROM " + inbox.table() + " WHERE consumer = '" + consumerName + "'");
    pool.dispose();
  }

  @Test
  void twoProcessesShareOnePartitionAndAKilledOneLosesNothingAndAppliesNothingTwice() throws Exception {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < MESSAGES; i++) {
      records.add(KafkaService.record(topic, 0, "key-" + (i % 13), "msg-" + i, "payload-" + i));
    }
    kafka.sendAll(records);

    Process a = start("A");
    Process b = start("B");
    // Both make progress on the one partition: a share group hands its records to every consumer.
    await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(200)).untilAsserted(() -> {
      assertThat(a.isAlive()).as("process A alive (see %s)", log).isTrue();
      assertThat(b.isAlive()).as("process B alive (see %s)", log).isTrue();
      assertThat(appliedBy("A")).isGreaterThanOrEqualTo(200);
      assertThat(appliedBy("B")).isGreaterThanOrEqualTo(200);
    });
    a.destroyForcibly(); // SIGKILL: its records stay acquired until their lock runs out
    a.waitFor(30, TimeUnit.SECONDS);
    long atKill = pg.count("SELECT count(*) FROM " + table);
    assertThat(atKill).as("killed mid-stream").isLessThan(MESSAGES);

    Process c = start("C");
    await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(500)).untilAsserted(() -> {
      assertThat(b.isAlive()).as("process B alive (see %s)", log).isTrue();
      assertThat(c.isAlive()).as("process C alive (see %s)", log).isTrue();
      assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(MESSAGES);
    });
    for (Process process : List.of(b, c)) {
      process.destroy(); // SIGTERM: a graceful stop commits the last acceptances and leaves the group
      assertThat(process.waitFor(60, TimeUnit.SECONDS)).as("stopped within 60 s (see %s)", log).isTrue();
    }

    System.out.println("applied by process and delivery: " + pg.column("SELECT payload || ' ' || count(*) FROM " + table
        + " GROUP BY payload ORDER BY payload") + ", " + atKill + " applied when A was killed");
    assertThat(pg.count("SELECT count(*) FROM " + table)).as("every message applied once").isEqualTo(MESSAGES);
    assertThat(pg.count("SELECT count(DISTINCT message_id) FROM " + table)).isEqualTo(MESSAGES);
    assertThat(appliedBy("C")).as("the process that joined after the kill made progress").isPositive();
    assertThat(ShareGroups.leftOver(kafka, group, topic, LOCK.multipliedBy(2).plusSeconds(1)))
        .as("every record accepted for good").isEmpty();
  }

  private Process start(String tag) {
    Process process = ConsumerProcess.startShare(kafka.bootstrapServers(), topic, group, consumerName, table, pg.url(), log, 32,
        tag);
    processes.add(process);
    return process;
  }

  private long appliedBy(String tag) {
    return pg.count("SELECT count(*) FROM " + table + " WHERE payload LIKE '" + tag + ":%'");
  }
}
