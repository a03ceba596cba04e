package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.kafka.testing.KafkaService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * A handler far slower than {@code max.poll.interval.ms} allows for a whole poll's worth of
 * records: the source pauses its partitions and keeps polling, so the member is never evicted
 * and nothing is redelivered.
 */
class KafkaBackpressureIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @Test
  void slowHandlerPausesPartitionsInsteadOfBeingEvictedFromTheGroup() {
    int messages = 24;
    try (Scenario s = new Scenario("slow", 1)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < messages; i++) {
        records.add(KafkaService.record(s.topic, 0, "key-" + i, "msg-" + i, "payload-" + i));
      }
      s.kafka.sendAll(records);
      AtomicInteger duplicates = new AtomicInteger();
      AtomicInteger processed = new AtomicInteger();
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> Mono.delay(Duration.ofMillis(250)).then(Mono.from(s.recordingHandler().handle(payload, tx))))
          .concurrency(1).prefetch(2).ordering(Ordering.UNORDERED)
          .build();
      // All 24 records take about 6 s, three times the poll interval the client allows itself.
      KafkaSourceOptions<String> options = s.options()
          .prefetch(12)
          .consumerProperty("max.poll.interval.ms", 2000)
          .revocationGracePeriod(Duration.ofSeconds(1))
          .build();
      try (KafkaSource<String> source = KafkaSource.create(options)) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> {
          if (o.status() == Outcome.Status.DUPLICATE) {
            duplicates.incrementAndGet();
          } else {
            processed.incrementAndGet();
          }
        });
        try {
          Map<Integer, Long> end = s.end();
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          running.dispose();
        }
      }
      assertThat(processed.get()).isEqualTo(messages);
      assertThat(duplicates.get()).as("redeliveries after an eviction").isZero();
      assertThat(s.effects()).isEqualTo(messages);
    }
  }
}
