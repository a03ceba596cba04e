package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.testing.ConsumerProcess;
import dev.idem.kafka.testing.KafkaService;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.Disposable;

/**
 * A consumer process killed with SIGKILL in the middle of the stream, twice, then a restart:
 * no effect missing, none applied twice.
 */
class KafkaCrashIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final int MESSAGES = 3_000;

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 32})
  void consumerKilledMidStreamAndRestartedMissesNoEffectAndAppliesNoneTwice(int maxBatchSize) throws Exception {
    try (Scenario s = new Scenario("crash", 2)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < MESSAGES; i++) {
        records.add(KafkaService.record(s.topic, null, "key-" + (i % 13), "msg-" + i, "payload-" + i));
      }
      s.kafka.sendAll(records);
      Path log = Paths.get("target", s.consumer + ".log");
      Files.createDirectories(log.getParent());

      long before = 0;
      for (int round = 1; round <= 2; round++) {
        long threshold = before + 300;
        Process process = ConsumerProcess.start(s.kafka.bootstrapServers(), s.topic, s.group, s.consumer, s.table, s.pg.url(),
            log, maxBatchSize);
        try {
          await().atMost(TIMEOUT).until(() -> s.effects() >= threshold || !process.isAlive());
          assertThat(process.isAlive()).as("consumer process alive (see %s)", log).isTrue();
        } finally {
          process.destroyForcibly(); // SIGKILL: no close, no commit, transactions in flight cut off
          process.waitFor(30, TimeUnit.SECONDS);
        }
        before = s.effects();
        assertThat(before).as("killed mid-stream in round %s", round).isLessThan(MESSAGES);
        assertThat(s.distinctEffects()).isEqualTo(before);
      }

      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox).handler(s.recordingHandler()).concurrency(8).ordering(Ordering.UNORDERED).maxBatchSize(maxBatchSize)
          .build();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        Disposable running = consumer.process(source.receive()).subscribe();
        try {
          Map<Integer, Long> end = s.end();
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(500))
              .untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          running.dispose();
        }
      }
      assertThat(s.effects()).isEqualTo(MESSAGES);
      assertThat(s.distinctEffects()).isEqualTo(MESSAGES);
    }
  }
}
