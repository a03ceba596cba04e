package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.testing.KafkaService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** Two consumers in one group, rebalancing while messages are in flight. */
class KafkaRebalanceIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final int MESSAGES = 4_000;
  /**
   * Published before the second member joins; the rest after it owns partitions. Any two of the
   * four partitions get at least 400 of the rest (29 keys spread 8, 8, 4 and 9 over them).
   */
  private static final int FIRST_BATCH = 3_000;

  @Test
  void rebalancesWhileProcessingMissNoEffectAndApplyNoneTwice() {
    try (Scenario s = new Scenario("rebalance", 4)) {
      s.kafka.sendAll(records(s.topic, 0, FIRST_BATCH));
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> Mono.delay(Duration.ofMillis(2)).then(Mono.from(s.recordingHandler().handle(payload, tx))))
          .concurrency(6).ordering(Ordering.BY_KEY)
          .build();
      AtomicLong byFirst = new AtomicLong();
      AtomicLong bySecond = new AtomicLong();
      try (KafkaSource<String> first = KafkaSource.create(s.options().build());
          KafkaSource<String> second = KafkaSource.create(s.options().build())) {
        Disposable one = consumer.process(first.receive()).subscribe(o -> byFirst.incrementAndGet());
        Disposable two = null;
        try {
          await().atMost(TIMEOUT).until(() -> s.effects() >= 600);
          // The second member joins: partitions move while the first has messages in flight.
          two = consumer.process(second.receive()).subscribe(o -> bySecond.incrementAndGet());
          // The cooperative rebalance hands the second member its partitions only seconds later, and
          // by then the first may have drained them (Kafka's fetcher empties one partition after
          // another), leaving the second nothing to do. Records published once the second owns
          // partitions are work that only it can take.
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(200)).until(() -> {
            Map<String, Set<Integer>> owners = s.kafka.assignments(s.group, s.topic);
            return owners.size() == 2 && owners.values().stream().noneMatch(Set::isEmpty);
          });
          s.kafka.sendAll(records(s.topic, FIRST_BATCH, MESSAGES));
          await().atMost(TIMEOUT).until(() -> bySecond.get() >= 200);
          // The first member leaves mid-stream: its partitions move back to the second.
          one.dispose();
          Map<Integer, Long> end = s.end();
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(500))
              .untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          one.dispose();
          if (two != null) {
            two.dispose();
          }
        }
      }
      assertThat(byFirst.get()).isPositive();
      assertThat(bySecond.get()).isPositive();
      assertThat(s.effects()).isEqualTo(MESSAGES);
      assertThat(s.distinctEffects()).isEqualTo(MESSAGES);
    }
  }

  private static List<ProducerRecord<byte[], byte[]>> records(String topic, int from, int to) {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = from; i < to; i++) {
      records.add(KafkaService.record(topic, null, "key-" + (i % 29), "msg-" + i, "payload-" + i));
    }
    return records;
  }
}
