package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.testing.KafkaService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * A handler that throws a JVM error ({@link StackOverflowError}) on the real broker: the stream
 * terminates with the error, the record is neither committed past nor dead-lettered, and a
 * restarted consumer applies every record once.
 */
class KafkaHandlerJvmErrorIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @Test
  void aHandlerStackOverflowStopsTheStreamCommitsNothingPastItAndARestartAppliesEverythingOnce() {
    try (Scenario s = new Scenario("jvm_error", 1)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        records.add(KafkaService.record(s.topic, 0, "k", "msg-" + i, "payload-" + i));
      }
      s.kafka.sendAll(records);
      s.kafka.createTopic(s.topic + ".DLT", 1);
      Handler<String> recording = s.recordingHandler();
      Handler<String> overflowsOnFive = (payload, tx) -> {
        if (payload.equals("payload-5")) {
          throw new StackOverflowError("test: recursion in the handler");
        }
        return recording.handle(payload, tx);
      };

      AtomicReference<Throwable> terminated = new AtomicReference<>();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        IdempotentConsumer<String> broken = IdempotentConsumer.<String>named(s.consumer).inbox(s.inbox).handler(overflowsOnFive)
            .ordering(Ordering.BY_PARTITION).build();
        Disposable running = broken.process(source.receive()).subscribe(o -> {}, terminated::set);
        try {
          await().atMost(TIMEOUT).until(() -> terminated.get() != null);
        } finally {
          running.dispose();
        }
      }
      assertThat(terminated.get()).isInstanceOf(StackOverflowError.class);
      assertThat(s.pg.count("SELECT count(*) FROM " + s.table + " WHERE message_id = 'msg-5'")).isZero();
      Map<Integer, Long> committed = s.committed();
      assertThat(committed.getOrDefault(0, 0L)).as("no commit past the record whose handler failed").isLessThanOrEqualTo(5L);
      assertThat(s.kafka.endOffsets(s.topic + ".DLT").values().stream().mapToLong(Long::longValue).sum())
          .as("a JVM error is not the message's fault: nothing dead-lettered").isZero();

      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        IdempotentConsumer<String> fixed = IdempotentConsumer.<String>named(s.consumer).inbox(s.inbox).handler(recording)
            .ordering(Ordering.BY_PARTITION).build();
        Disposable running = fixed.process(source.receive()).subscribe();
        try {
          Map<Integer, Long> end = s.end();
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(300))
              .untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          running.dispose();
        }
      }
      assertThat(s.effects()).isEqualTo(10);
      assertThat(s.distinctEffects()).isEqualTo(10);
    }
  }
}
