package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

class MessageIdsTests {

  private static ConsumerRecord<byte[], byte[]> record(String idHeader, String id) {
    ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>("orders", 3, 42L, "k".getBytes(StandardCharsets.UTF_8),
        "v".getBytes(StandardCharsets.UTF_8));
    if (id != null) {
      record.headers().add(idHeader, id.getBytes(StandardCharsets.UTF_8));
    }
    return record;
  }

  @Test
  void idComesFromTheConfiguredHeaderLastValueWins() {
    ConsumerRecord<byte[], byte[]> r = record("message-id", "first");
    r.headers().add("message-id", "second".getBytes(StandardCharsets.UTF_8));
    assertThat(new MessageIds<String>("message-id", null, true).resolve(r, "v")).isEqualTo("second");
    assertThat(new MessageIds<String>("event-id", null, true).resolve(record("event-id", "e-1"), "v")).isEqualTo("e-1");
  }

  @Test
  void missingOrBlankIdFallsBackToTopicPartitionOffset() {
    MessageIds<String> ids = new MessageIds<>("message-id", null, true);
    assertThat(ids.resolve(record("message-id", null), "v")).isEqualTo("orders/3/42");
    assertThat(ids.resolve(record("message-id", "  "), "v")).isEqualTo("orders/3/42");
    assertThat(ids.resolve(record("other", "x"), "v")).isEqualTo("orders/3/42");
  }

  @Test
  void withoutFallbackAMissingIdIsNull() {
    assertThat(new MessageIds<String>("message-id", null, false).resolve(record("message-id", null), "v")).isNull();
  }

  @Test
  void extractorTakesPrecedenceAndSeesThePayload() {
    MessageIds<String> ids = new MessageIds<>("message-id", (record, payload) -> payload == null ? null : "order:" + payload, true);
    assertThat(ids.resolve(record("message-id", "header-id"), "42")).isEqualTo("order:42");
    assertThat(ids.resolve(record("message-id", "header-id"), null)).isEqualTo("orders/3/42");
  }
}
