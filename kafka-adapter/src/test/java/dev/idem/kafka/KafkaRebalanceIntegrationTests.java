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
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** Two consumers in one group, rebalancing while messages are in flight. */
class KafkaRebalanceIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final int MESSAGES = 4_000;

  @Test
  void rebalancesWhileProcessingMissNoEffectAndApplyNoneTwice() {
    try (Scenario s = new Scenario("rebalance", 4)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < MESSAGES; i++) {
        records.add(KafkaService.record(s.topic, null, "key-" + (i % 29), "msg-" + i, "payload-" + i));
      }
      s.kafka.sendAll(records);
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
}
