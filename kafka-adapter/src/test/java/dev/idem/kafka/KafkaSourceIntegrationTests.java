package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.kafka.internal.KafkaDelivery;
import dev.idem.kafka.testing.KafkaService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The Kafka source end to end against a real KRaft broker and a real PostgreSQL. */
class KafkaSourceIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 64})
  void tenThousandMessagesWithTenPercentPublishedTwiceHaveExactlyOneEffectEachAndCommitToTheEnd(int maxBatchSize) {
    try (Scenario s = new Scenario("bulk", 4)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < 10_000; i++) {
        ProducerRecord<byte[], byte[]> record = KafkaService.record(s.topic, null, "key-" + (i % 101), "msg-" + i,
            "payload-" + i);
        records.add(record);
        if (i % 10 == 0) {
          records.add(KafkaService.record(s.topic, null, "key-" + (i % 101), "msg-" + i, "payload-" + i));
        }
      }
      s.kafka.sendAll(records);
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox).handler(s.recordingHandler())
          .concurrency(12).prefetch(256).ordering(Ordering.UNORDERED).maxBatchSize(maxBatchSize)
          .build();
      AtomicLong duplicates = new AtomicLong();
      try (KafkaSource<String> source = KafkaSource.create(s.options().prefetch(500).build())) {
        Disposable running = consumer.process(source.receive())
            .filter(o -> o.status() == Outcome.Status.DUPLICATE)
            .subscribe(o -> duplicates.incrementAndGet());
        try {
          Map<Integer, Long> end = s.end();
          assertThat(end.values().stream().mapToLong(Long::longValue).sum()).isEqualTo(11_000);
          await().atMost(TIMEOUT).pollInterval(Duration.ofMillis(500))
              .untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          running.dispose();
        }
      }
      assertThat(s.effects()).isEqualTo(10_000);
      assertThat(s.distinctEffects()).isEqualTo(10_000);
      assertThat(duplicates.get()).isEqualTo(1_000);
    }
  }

  @Test
  void slowEarlyMessageHoldsBackTheCommitOfLaterSettledMessagesUntilItIsDone() {
    try (Scenario s = new Scenario("ooo", 2)) {
      Sinks.Empty<Void> release = Sinks.empty();
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> (payload.equals("slow") ? release.asMono() : Mono.<Void>empty())
              .then(Mono.from(s.recordingHandler().handle(payload, tx)).then()))
          .concurrency(4).ordering(Ordering.UNORDERED)
          .build();
      List<ProducerRecord<byte[], byte[]>> first = new ArrayList<>();
      first.add(KafkaService.record(s.topic, 0, "a", "slow-0", "slow"));
      for (int i = 1; i <= 4; i++) {
        first.add(KafkaService.record(s.topic, 0, "k" + i, "fast-" + i, "fast-" + i));
      }
      s.kafka.sendAll(first);
      Set<String> settled = ConcurrentHashMap.newKeySet();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> settled.add(o.messageId()));
        try {
          await().atMost(TIMEOUT).until(() -> settled.containsAll(Set.of("fast-1", "fast-2", "fast-3", "fast-4")));
          assertThat(settled).doesNotContain("slow-0");

          // A commit that includes partition 1 runs after the four later messages of partition 0 were settled ...
          s.kafka.sendAll(List.of(KafkaService.record(s.topic, 1, "p", "probe", "probe")));
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(1, 1L));
          // ... and still commits nothing for partition 0, whose first message is unsettled.
          assertThat(s.committed().getOrDefault(0, 0L)).isZero();
          assertThat(s.effects()).isEqualTo(5);

          release.tryEmitEmpty();
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 5L));
          assertThat(s.effects()).isEqualTo(6);
        } finally {
          running.dispose();
        }
      }
    }
  }

  @Test
  void byKeyAppliesTheEffectsOfEachKeyInPartitionOrderWhileKeysRunInParallel() {
    int keys = 8;
    int perKey = 60;
    try (Scenario s = new Scenario("bykey", 2)) {
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < perKey; i++) {
        for (int k = 0; k < keys; k++) {
          records.add(KafkaService.record(s.topic, null, "key-" + k, "key-" + k + "-" + i, "key-" + k + ":" + i));
        }
      }
      s.kafka.sendAll(records);
      Map<String, Long> offsetById = new ConcurrentHashMap<>();
      Map<String, Integer> partitionById = new ConcurrentHashMap<>();
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> Mono.delay(Duration.ofMillis(ThreadLocalRandom.current().nextInt(3)))
              .then(Mono.from(s.recordingHandler().handle(payload, tx))))
          .concurrency(8).ordering(Ordering.BY_KEY)
          .build();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> {
          KafkaDelivery<String> d = (KafkaDelivery<String>) o.delivery();
          offsetById.put(o.messageId(), d.record().offset());
          partitionById.put(o.messageId(), d.record().partition());
        });
        try {
          Map<Integer, Long> end = s.end();
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).isEqualTo(end));
        } finally {
          running.dispose();
        }
      }
      assertThat(s.effects()).isEqualTo((long) keys * perKey);
      List<Map<String, Object>> rows = s.pg.query("SELECT message_id, payload FROM " + s.table + " ORDER BY seq");
      Map<String, List<Long>> offsetsInEffectOrder = new java.util.HashMap<>();
      Map<String, List<Integer>> seqInEffectOrder = new java.util.HashMap<>();
      for (Map<String, Object> row : rows) {
        String id = (String) row.get("message_id");
        String[] keyAndSeq = ((String) row.get("payload")).split(":");
        offsetsInEffectOrder.computeIfAbsent(keyAndSeq[0], k -> new ArrayList<>()).add(offsetById.get(id));
        seqInEffectOrder.computeIfAbsent(keyAndSeq[0], k -> new ArrayList<>()).add(Integer.parseInt(keyAndSeq[1]));
      }
      assertThat(offsetsInEffectOrder).hasSize(keys);
      offsetsInEffectOrder.forEach((key, offsets) -> {
        assertThat(offsets).as("offsets of %s in effect order", key).isSorted().doesNotContainNull().hasSize(perKey);
        assertThat(seqInEffectOrder.get(key)).as("publish order of %s in effect order", key).isSorted();
      });
    }
  }
}
