package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.kafka.internal.KafkaDelivery;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.LogCapture;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SerializationException;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/** Dead-letter topic and replay against a real KRaft broker and a real PostgreSQL. */
class KafkaDeadLetterIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @Test
  void poisonPillAndAlwaysFailingMessageLandOnTheDeadLetterTopicWithHeadersAndTheStreamGoesOn() {
    try (Scenario s = new Scenario("dlt", 1)) {
      String dlt = s.topic + ".DLT";
      s.kafka.createTopic(dlt, 1);
      ProducerRecord<byte[], byte[]> poison = new ProducerRecord<>(s.topic, 0, "kp".getBytes(StandardCharsets.UTF_8),
          StrictUtf8Deserializer.POISON);
      poison.headers().add("message-id", "poison-1".getBytes(StandardCharsets.UTF_8));
      s.kafka.sendAll(List.of(
          KafkaService.record(s.topic, 0, "k0", "ok-0", "hello-0"),
          poison,
          KafkaService.record(s.topic, 0, "kf", "fail-1", "always-fail"),
          KafkaService.record(s.topic, 0, "k1", "ok-1", "hello-1"),
          KafkaService.record(s.topic, 0, "k2", "ok-2", "hello-2"),
          KafkaService.record(s.topic, 0, "k3", "ok-3", "hello-3"),
          KafkaService.record(s.topic, 0, "k4", "ok-4", "hello-4")));
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> payload.equals("always-fail")
              ? Mono.error(new IllegalStateException("handler always fails"))
              : s.recordingHandler().handle(payload, tx))
          .retry(RetryPolicy.backoff(3, Duration.ofMillis(10)))
          .ordering(Ordering.BY_PARTITION)
          .build();
      Map<String, Outcome.Status> outcomes = new ConcurrentHashMap<>();
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      try (KafkaSource<String> source = KafkaSource.create(s.options().meterRegistry(registry).build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> outcomes.put(o.messageId(), o.status()));
        try {
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 7L));
          // Kafka's own client metrics reach the application's registry, consumer and dead-letter producer alike.
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(registry.getMeters())
              .anySatisfy(m -> assertThat(m.getId().getName()).startsWith("kafka.consumer."))
              .anySatisfy(m -> assertThat(m.getId().getName()).startsWith("kafka.producer.")));
        } finally {
          running.dispose();
        }
      }
      assertThat(s.effects()).isEqualTo(5);
      assertThat(outcomes).containsEntry("poison-1", Outcome.Status.DEAD_LETTERED)
          .containsEntry("fail-1", Outcome.Status.DEAD_LETTERED)
          .containsEntry("ok-4", Outcome.Status.PROCESSED);

      List<DeadLetterRecord> letters = KafkaDeadLetterReplayer.create(s.kafka.bootstrapServers()).read(dlt);
      assertThat(letters).hasSize(2);
      DeadLetterRecord pill = letters.get(0);
      assertThat(pill.messageId()).isEqualTo("poison-1");
      assertThat(pill.headers()).containsEntry("message-id", "poison-1");
      assertThat(pill.key()).isEqualTo("kp".getBytes(StandardCharsets.UTF_8));
      assertThat(pill.value()).isEqualTo(StrictUtf8Deserializer.POISON);
      assertThat(pill.originalTopic()).isEqualTo(s.topic);
      assertThat(pill.originalPartition()).isZero();
      assertThat(pill.originalOffset()).isEqualTo(1L);
      assertThat(pill.consumer()).isEqualTo(s.consumer);
      assertThat(pill.reason()).isEqualTo("UNDECODABLE_PAYLOAD");
      assertThat(pill.errorClass()).isEqualTo(SerializationException.class.getName());
      assertThat(pill.errorMessage()).contains("not UTF-8");
      assertThat(pill.attempts()).isZero();

      DeadLetterRecord failed = letters.get(1);
      assertThat(failed.messageId()).isEqualTo("fail-1");
      assertThat(failed.keyAsString()).contains("kf");
      assertThat(failed.valueAsString()).contains("always-fail");
      assertThat(failed.originalTopic()).isEqualTo(s.topic);
      assertThat(failed.originalPartition()).isZero();
      assertThat(failed.originalOffset()).isEqualTo(2L);
      assertThat(failed.consumer()).isEqualTo(s.consumer);
      assertThat(failed.reason()).isEqualTo("RETRIES_EXHAUSTED");
      assertThat(failed.errorClass()).isEqualTo(IllegalStateException.class.getName());
      assertThat(failed.errorMessage()).isEqualTo("handler always fails");
      assertThat(failed.attempts()).isEqualTo(3);
      assertThat(failed.headers()).containsKeys(DeadLetterHeaders.DETAIL);
    }
  }

  @Test
  void replayingADeadLetterAfterTheFixAppliesItOnceAndReplayingItAgainChangesNothing() {
    try (Scenario s = new Scenario("replay", 1)) {
      String dlt = s.topic + ".DLT";
      s.kafka.createTopic(dlt, 1);
      AtomicBoolean broken = new AtomicBoolean(true);
      AtomicInteger duplicates = new AtomicInteger();
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox)
          .handler((payload, tx) -> broken.get()
              ? Mono.error(new NonRetryableException("downstream rejects " + payload))
              : s.recordingHandler().handle(payload, tx))
          .build();
      s.kafka.sendAll(List.of(KafkaService.record(s.topic, 0, "order-7", "refund-7", "refund 7")));
      KafkaDeadLetterReplayer replayer = KafkaDeadLetterReplayer.create(s.kafka.bootstrapServers());
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        Disposable running = consumer.process(source.receive())
            .filter(o -> o.status() == Outcome.Status.DUPLICATE)
            .subscribe(o -> duplicates.incrementAndGet());
        try {
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 1L));
          assertThat(s.effects()).isZero();
          assertThat(replayer.read(dlt)).singleElement()
              .satisfies(r -> assertThat(r.reason()).isEqualTo("NON_RETRYABLE_ERROR"));

          broken.set(false);
          assertThat(replayer.replay(dlt, r -> "refund-7".equals(r.messageId()))).isEqualTo(1);
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 2L));
          assertThat(s.effects()).isEqualTo(1);

          assertThat(replayer.replay(dlt, r -> "refund-7".equals(r.messageId()))).isEqualTo(1);
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 3L));
          assertThat(s.effects()).isEqualTo(1);
          assertThat(s.pg.column("SELECT message_id FROM " + s.table)).containsExactly("refund-7");
          assertThat(duplicates.get()).isEqualTo(1);
          assertThat(replayer.read(dlt)).hasSize(1);
          assertThat(replayer.replay(dlt, r -> false)).isZero();
        } finally {
          running.dispose();
        }
      }
    }
  }

  @Test
  void deadLetterTopicThatRefusesTheRecordHoldsTheCommitsAtItSaysSoAtErrorAndAppliesLaterRecordsOnce() {
    try (Scenario s = new Scenario("refused", 1); LogCapture logs = LogCapture.of("dev.idem.kafka")) {
      String dlt = s.topic + ".DLT";
      s.kafka.createTopic(dlt, 1, Map.of("max.message.bytes", "1024"));
      // Not UTF-8, so a poison pill, and four times what the dead-letter topic accepts.
      byte[] tooLarge = new byte[4096];
      Arrays.fill(tooLarge, (byte) 0xFF);
      ProducerRecord<byte[], byte[]> poison = new ProducerRecord<>(s.topic, 0, "kp".getBytes(StandardCharsets.UTF_8), tooLarge);
      poison.headers().add("message-id", "poison-1".getBytes(StandardCharsets.UTF_8));
      s.kafka.sendAll(List.of(
          KafkaService.record(s.topic, 0, "k0", "ok-0", "hello-0"),
          poison,
          KafkaService.record(s.topic, 0, "k2", "ok-2", "hello-2"),
          KafkaService.record(s.topic, 0, "k3", "ok-3", "hello-3"),
          KafkaService.record(s.topic, 0, "k4", "ok-4", "hello-4")));
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox).handler(s.recordingHandler()).ordering(Ordering.BY_PARTITION)
          .build();
      String partition = s.topic + "-0";
      Map<Long, Outcome.Status> first = new ConcurrentHashMap<>();
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      try (KafkaSource<String> source = KafkaSource.create(s.options().meterRegistry(registry)
          .heldCommitsLogInterval(Duration.ofMillis(300)).build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> first.put(offset(o), o.status()));
        try {
          await().atMost(TIMEOUT).until(() -> first.keySet().containsAll(List.of(0L, 2L, 3L, 4L)));
          // Said at ERROR when it happens, with the partition, offset and message id ...
          await().atMost(TIMEOUT)
              .until(() -> !logs.messages(Level.ERROR,
                  m -> m.contains("the dead letter of " + partition + "@1 (message 'poison-1') failed for good")
                      && m.contains("RecordTooLargeException"))
                  .isEmpty());
          // ... and again, with how long, for as long as the partition's commits are held.
          await().atMost(TIMEOUT)
              .until(() -> logs.messages(Level.ERROR, m -> m.contains("commits of " + partition + " are held at offset 1 for ")
                  && m.contains("'poison-1'")).size() >= 2);
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 1L));
          assertThat(registry.get(KafkaSource.FAILED_DEAD_LETTERS_METRIC).tag("idem.source", s.group).counter().count())
              .isEqualTo(1.0);
          assertThat(registry.get(KafkaSource.HELD_PARTITIONS_METRIC).tag("idem.source", s.group).gauge().value()).isEqualTo(1.0);
        } finally {
          running.dispose();
        }
      }
      // Closing the source committed everything settled: up to the refused record, not past it.
      assertThat(s.committed()).containsEntry(0, 1L);
      assertThat(first).doesNotContainKey(1L).containsValues(Outcome.Status.PROCESSED);
      assertThat(s.pg.column("SELECT message_id FROM " + s.table + " ORDER BY seq")).containsExactly("ok-0", "ok-2", "ok-3",
          "ok-4");
      assertThat(s.kafka.readAll(dlt)).isEmpty();

      // Nothing is lost: once the dead-letter topic takes it, the record comes back after a restart,
      // is dead-lettered, and the commits move past it; the later records are duplicates.
      s.kafka.setTopicConfig(dlt, "max.message.bytes", "1048576");
      Map<Long, Outcome.Status> second = new ConcurrentHashMap<>();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> second.put(offset(o), o.status()));
        try {
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 5L));
        } finally {
          running.dispose();
        }
      }
      assertThat(second).containsEntry(1L, Outcome.Status.DEAD_LETTERED).containsEntry(2L, Outcome.Status.DUPLICATE)
          .containsEntry(3L, Outcome.Status.DUPLICATE).containsEntry(4L, Outcome.Status.DUPLICATE);
      assertThat(s.effects()).isEqualTo(4);
      assertThat(KafkaDeadLetterReplayer.create(s.kafka.bootstrapServers()).read(dlt)).singleElement().satisfies(letter -> {
        assertThat(letter.messageId()).isEqualTo("poison-1");
        assertThat(letter.originalOffset()).isEqualTo(1L);
        assertThat(letter.value()).isEqualTo(tooLarge);
        assertThat(letter.reason()).isEqualTo("UNDECODABLE_PAYLOAD");
      });
    }
  }

  private static long offset(Outcome<String> outcome) {
    return ((KafkaDelivery<String>) outcome.delivery()).record().offset();
  }
}
