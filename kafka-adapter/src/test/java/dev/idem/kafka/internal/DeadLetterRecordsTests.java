package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.DeadLetter;
import dev.idem.DeadLetterReason;
import dev.idem.kafka.DeadLetterHeaders;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.junit.jupiter.api.Test;

class DeadLetterRecordsTests {

  private static Map<String, String> asMap(Headers headers) {
    Map<String, String> map = new HashMap<>();
    for (Header h : headers) {
      map.put(h.key(), new String(h.value(), StandardCharsets.UTF_8));
    }
    return map;
  }

  private static ConsumerRecord<byte[], byte[]> original() {
    ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>("payments", 2, 17L, "acct-1".getBytes(StandardCharsets.UTF_8),
        new byte[]{1, 2, 3});
    record.headers().add("trace-id", "t-9".getBytes(StandardCharsets.UTF_8));
    record.headers().add(DeadLetterHeaders.REASON, "STALE".getBytes(StandardCharsets.UTF_8));
    return record;
  }

  @Test
  void deadLetterRecordKeepsKeyValueAndHeadersAndAddsTheDiagnosis() {
    DeadLetter letter = DeadLetter.of(DeadLetterReason.RETRIES_EXHAUSTED, new IllegalStateException("boom"), "payments-consumer",
        5);
    ProducerRecord<byte[], byte[]> dlt = DeadLetterRecords.deadLetterRecord("payments.DLT", original(), "pay-1", "message-id",
        letter);
    assertThat(dlt.topic()).isEqualTo("payments.DLT");
    assertThat(dlt.partition()).isNull();
    assertThat(dlt.key()).isEqualTo("acct-1".getBytes(StandardCharsets.UTF_8));
    assertThat(dlt.value()).containsExactly(1, 2, 3);
    assertThat(asMap(dlt.headers()))
        .containsEntry("trace-id", "t-9")
        .containsEntry("message-id", "pay-1")
        .containsEntry(DeadLetterHeaders.MESSAGE_ID, "pay-1")
        .containsEntry(DeadLetterHeaders.ORIGINAL_TOPIC, "payments")
        .containsEntry(DeadLetterHeaders.ORIGINAL_PARTITION, "2")
        .containsEntry(DeadLetterHeaders.ORIGINAL_OFFSET, "17")
        .containsEntry(DeadLetterHeaders.CONSUMER, "payments-consumer")
        .containsEntry(DeadLetterHeaders.REASON, "RETRIES_EXHAUSTED")
        .containsEntry(DeadLetterHeaders.ERROR_CLASS, IllegalStateException.class.getName())
        .containsEntry(DeadLetterHeaders.ERROR_MESSAGE, "boom")
        .containsEntry(DeadLetterHeaders.ATTEMPTS, "5")
        .containsKey(DeadLetterHeaders.DETAIL);
    assertThat(dlt.headers().headers(DeadLetterHeaders.REASON)).hasSize(1);
  }

  @Test
  void hugeErrorTextsAreTruncatedSoTheDeadLetterStillFitsTheTopic() {
    DeadLetter letter = DeadLetter.of(DeadLetterReason.RETRIES_EXHAUSTED, new IllegalStateException("x".repeat(2_000_000)), "c",
        3);
    ProducerRecord<byte[], byte[]> dlt = DeadLetterRecords.deadLetterRecord("payments.DLT", original(), "pay-1", "message-id",
        letter);
    assertThat(asMap(dlt.headers()).get(DeadLetterHeaders.ERROR_MESSAGE)).hasSize(DeadLetterRecords.MAX_TEXT_HEADER_LENGTH)
        .endsWith("...");
    assertThat(asMap(dlt.headers()).get(DeadLetterHeaders.DETAIL)).hasSize(DeadLetterRecords.MAX_TEXT_HEADER_LENGTH);
  }

  @Test
  void rejectedMessagesHaveNoErrorHeaders() {
    DeadLetter letter = DeadLetter.rejected(DeadLetterReason.MISSING_ID, "id is null", "c");
    ProducerRecord<byte[], byte[]> dlt = DeadLetterRecords.deadLetterRecord("payments.DLT", original(), null, "message-id",
        letter);
    assertThat(asMap(dlt.headers())).doesNotContainKeys("message-id", DeadLetterHeaders.MESSAGE_ID,
        DeadLetterHeaders.ERROR_CLASS, DeadLetterHeaders.ERROR_MESSAGE).containsEntry(DeadLetterHeaders.ATTEMPTS, "0");
  }

  @Test
  void replayRecordGoesToTheOriginalTopicWithTheSameIdAndWithoutDeadLetterHeaders() {
    DeadLetter letter = DeadLetter.of(DeadLetterReason.NON_RETRYABLE_ERROR, new RuntimeException("x"), "c", 1);
    ProducerRecord<byte[], byte[]> dlt = DeadLetterRecords.deadLetterRecord("payments.DLT", original(), "pay-1", "message-id",
        letter);
    ConsumerRecord<byte[], byte[]> read = new ConsumerRecord<>("payments.DLT", 0, 0L, dlt.key(), dlt.value());
    dlt.headers().forEach(h -> read.headers().add(h));
    ProducerRecord<byte[], byte[]> replay = DeadLetterRecords.replayRecord(read, "payments");
    assertThat(replay.topic()).isEqualTo("payments");
    assertThat(replay.key()).isEqualTo(dlt.key());
    assertThat(replay.value()).isEqualTo(dlt.value());
    assertThat(asMap(replay.headers())).containsOnlyKeys("trace-id", "message-id").containsEntry("message-id", "pay-1");
  }

  @Test
  void secretsAreMaskedByKey() {
    assertThat(Secrets.mask(Map.of("sasl.jaas.config", "x", "ssl.key.password", "y", "client.id", "z")))
        .containsEntry("sasl.jaas.config", "******").containsEntry("ssl.key.password", "******").containsEntry("client.id", "z");
  }
}
