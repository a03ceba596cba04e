package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.kafka.internal.KafkaDelivery;
import dev.idem.kafka.testing.KafkaService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.Deserializer;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * Input the source must turn into dead letters without stopping or wrongly deduplicating: JVM
 * errors of the value deserializer, message ids that are not UTF-8, records that carry two ids.
 * Against a real KRaft broker and a real PostgreSQL.
 */
class KafkaBadInputIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @Test
  void deserializerThrowingAnAssertionErrorMakesThatRecordAPoisonPillAndTheStreamGoesOn() {
    decoderErrorIsAPoisonPill(new AssertionError("decoder invariant broken"));
  }

  @Test
  void deserializerThrowingAnOutOfMemoryErrorMakesThatRecordAPoisonPillAndTheStreamGoesOn() {
    // Thrown by the deserializer, as a decoder that sizes a buffer from a corrupt length field
    // would; the heap is not really exhausted.
    decoderErrorIsAPoisonPill(new OutOfMemoryError("test decoder: Java heap space"));
  }

  private static void decoderErrorIsAPoisonPill(Error error) {
    try (Scenario s = new Scenario("decoder_error", 1)) {
      String dlt = s.topic + ".DLT";
      s.kafka.createTopic(dlt, 1);
      s.kafka.sendAll(List.of(
          KafkaService.record(s.topic, 0, "k0", "ok-0", "hello-0"),
          KafkaService.record(s.topic, 0, "kx", "explode-1", "explode"),
          KafkaService.record(s.topic, 0, "k2", "ok-2", "hello-2"),
          KafkaService.record(s.topic, 0, "k3", "ok-3", "hello-3")));
      Deserializer<String> deserializer = (topic, data) -> {
        String value = new String(data, StandardCharsets.UTF_8);
        if (value.equals("explode")) {
          throw error;
        }
        return value;
      };
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox).handler(s.recordingHandler()).ordering(Ordering.BY_PARTITION)
          .build();
      Map<Long, Outcome.Status> outcomes = new ConcurrentHashMap<>();
      try (KafkaSource<String> source = KafkaSource.create(s.options().valueDeserializer(deserializer).build())) {
        Disposable running = consumer.process(source.receive()).subscribe(o -> outcomes.put(offset(o), o.status()));
        try {
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 4L));
        } finally {
          running.dispose();
        }
      }
      assertThat(outcomes).containsEntry(1L, Outcome.Status.DEAD_LETTERED);
      assertThat(s.pg.column("SELECT message_id FROM " + s.table + " ORDER BY seq")).containsExactly("ok-0", "ok-2", "ok-3");
      assertThat(KafkaDeadLetterReplayer.create(s.kafka.bootstrapServers()).read(dlt)).singleElement().satisfies(letter -> {
        assertThat(letter.messageId()).isEqualTo("explode-1");
        assertThat(letter.originalOffset()).isEqualTo(1L);
        assertThat(letter.reason()).isEqualTo("UNDECODABLE_PAYLOAD");
        assertThat(letter.errorClass()).isEqualTo(error.getClass().getName());
        assertThat(letter.errorMessage()).isEqualTo(error.getMessage());
      });
    }
  }

  @Test
  void idsThatAreNotUtf8OrAppearTwiceWithDifferentValuesAreInvalidIdDeadLettersNeverDuplicates() {
    try (Scenario s = new Scenario("bad_ids", 1)) {
      String dlt = s.topic + ".DLT";
      s.kafka.createTopic(dlt, 1);
      byte[] ff41 = {(byte) 0xFF, 0x41};
      byte[] fe41 = {(byte) 0xFE, 0x41};
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      records.add(withIds(KafkaService.record(s.topic, 0, "k0", null, "first"), ff41));
      // Decoded leniently, FE 41 and FF 41 would both be "\uFFFDA": the same id, so this one a duplicate.
      records.add(withIds(KafkaService.record(s.topic, 0, "k1", null, "second"), fe41));
      records.add(KafkaService.record(s.topic, 0, "k2", "ok-2", "third"));
      records.add(withIds(KafkaService.record(s.topic, 0, "k3", null, "fourth"), utf8("pay-3a"), utf8("pay-3b")));
      records.add(withIds(KafkaService.record(s.topic, 0, "k4", null, "fifth"), utf8("pay-4"), utf8("pay-4")));
      s.kafka.sendAll(records);
      IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(s.consumer)
          .inbox(s.inbox).handler(s.recordingHandler()).ordering(Ordering.BY_PARTITION)
          .build();
      Map<Long, Outcome.Status> outcomes = new ConcurrentHashMap<>();
      try (KafkaSource<String> source = KafkaSource.create(s.options().build())) {
        // Outcome.messageId() would ask the delivery for its id, which these records do not have.
        Disposable running = consumer.process(source.receive()).subscribe(o -> outcomes.put(offset(o), o.status()));
        try {
          await().atMost(TIMEOUT).untilAsserted(() -> assertThat(s.committed()).containsEntry(0, 5L));
        } finally {
          running.dispose();
        }
      }
      assertThat(outcomes).containsExactlyInAnyOrderEntriesOf(Map.of(
          0L, Outcome.Status.DEAD_LETTERED, 1L, Outcome.Status.DEAD_LETTERED, 2L, Outcome.Status.PROCESSED,
          3L, Outcome.Status.DEAD_LETTERED, 4L, Outcome.Status.PROCESSED));
      assertThat(s.pg.query("SELECT message_id, payload FROM " + s.table + " ORDER BY seq"))
          .containsExactly(Map.of("message_id", "ok-2", "payload", "third"), Map.of("message_id", "pay-4", "payload", "fifth"));

      List<ConsumerRecord<byte[], byte[]>> letters = s.kafka.readAll(dlt);
      assertThat(letters).hasSize(3);
      assertThat(letters).allSatisfy(letter -> {
        assertThat(text(letter, DeadLetterHeaders.REASON)).isEqualTo("INVALID_ID");
        assertThat(text(letter, DeadLetterHeaders.ERROR_CLASS)).isEqualTo(IllegalArgumentException.class.getName());
        assertThat(letter.headers().lastHeader(DeadLetterHeaders.MESSAGE_ID)).isNull();
      });
      // The dead letters keep the id headers as they were, byte for byte.
      assertThat(text(letters.get(0), DeadLetterHeaders.ORIGINAL_OFFSET)).isEqualTo("0");
      assertThat(ids(letters.get(0))).containsExactly(ff41);
      assertThat(text(letters.get(0), DeadLetterHeaders.ERROR_MESSAGE)).contains("not valid UTF-8").contains("ff 41");
      assertThat(text(letters.get(1), DeadLetterHeaders.ORIGINAL_OFFSET)).isEqualTo("1");
      assertThat(ids(letters.get(1))).containsExactly(fe41);
      assertThat(text(letters.get(1), DeadLetterHeaders.ERROR_MESSAGE)).contains("not valid UTF-8").contains("fe 41");
      assertThat(text(letters.get(2), DeadLetterHeaders.ORIGINAL_OFFSET)).isEqualTo("3");
      assertThat(ids(letters.get(2))).containsExactly(utf8("pay-3a"), utf8("pay-3b"));
      assertThat(text(letters.get(2), DeadLetterHeaders.ERROR_MESSAGE)).contains("2 different values");
    }
  }

  private static ProducerRecord<byte[], byte[]> withIds(ProducerRecord<byte[], byte[]> record, byte[]... ids) {
    for (byte[] id : ids) {
      record.headers().add(KafkaSourceOptions.DEFAULT_MESSAGE_ID_HEADER, id);
    }
    return record;
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static List<byte[]> ids(ConsumerRecord<byte[], byte[]> record) {
    List<byte[]> ids = new ArrayList<>();
    for (Header h : record.headers().headers(KafkaSourceOptions.DEFAULT_MESSAGE_ID_HEADER)) {
      ids.add(h.value());
    }
    return ids;
  }

  private static String text(ConsumerRecord<byte[], byte[]> record, String header) {
    Header h = record.headers().lastHeader(header);
    return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static long offset(Outcome<String> outcome) {
    return ((KafkaDelivery<String>) outcome.delivery()).record().offset();
  }
}
