package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
  void idComesFromTheConfiguredHeader() {
    assertThat(new MessageIds<String>("message-id", null, true).resolve(record("message-id", "m-1"), "v")).isEqualTo("m-1");
    assertThat(new MessageIds<String>("event-id", null, true).resolve(record("event-id", "e-1"), "v")).isEqualTo("e-1");
  }

  @Test
  void anIdHeaderRepeatedWithTheSameValueIsOneIdAndWithDifferentValuesIsInvalid() {
    MessageIds<String> ids = new MessageIds<>("message-id", null, true);
    ConsumerRecord<byte[], byte[]> same = record("message-id", "pay-1");
    same.headers().add("message-id", "pay-1".getBytes(StandardCharsets.UTF_8));
    assertThat(ids.resolve(same, "v")).isEqualTo("pay-1");

    ConsumerRecord<byte[], byte[]> different = record("message-id", "first");
    different.headers().add("message-id", "second".getBytes(StandardCharsets.UTF_8));
    assertThatThrownBy(() -> ids.resolve(different, "v")).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("header 'message-id' appears 2 times with 2 different values; producers disagree on the message's id");

    ConsumerRecord<byte[], byte[]> three = record("message-id", "a");
    for (String value : new String[]{"a", "b", "a", "c"}) {
      three.headers().add("message-id", value.getBytes(StandardCharsets.UTF_8));
    }
    three.headers().add("other", "x".getBytes(StandardCharsets.UTF_8));
    assertThatThrownBy(() -> ids.resolve(three, "v"))
        .hasMessage("header 'message-id' appears 5 times with 3 different values; producers disagree on the message's id");
  }

  @Test
  void anIdThatIsNotAsciiIsDecodedAsUtf8AmongOtherHeaders() {
    MessageIds<String> ids = new MessageIds<>("message-id", null, true);
    ConsumerRecord<byte[], byte[]> record = record("trace", "t-1");
    record.headers().add("message-id", "zahlung-\u00fc-\uD83D\uDCB6".getBytes(StandardCharsets.UTF_8));
    record.headers().add("after", "x".getBytes(StandardCharsets.UTF_8));

    assertThat(ids.resolve(record, "v")).isEqualTo("zahlung-\u00fc-\uD83D\uDCB6");
  }

  @Test
  void anIdHeaderThatIsNotUtf8IsInvalidInsteadOfDecodedWithReplacementCharacters() {
    MessageIds<String> ids = new MessageIds<>("message-id", null, true);
    ConsumerRecord<byte[], byte[]> ff = record("message-id", null);
    ff.headers().add("message-id", new byte[]{(byte) 0xFF, 0x41});
    ConsumerRecord<byte[], byte[]> fe = record("message-id", null);
    fe.headers().add("message-id", new byte[]{(byte) 0xFE, 0x41});
    assertThatThrownBy(() -> ids.resolve(ff, "v")).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("header 'message-id' is not valid UTF-8 (2 bytes: ff 41)");
    assertThatThrownBy(() -> ids.resolve(fe, "v")).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("header 'message-id' is not valid UTF-8 (2 bytes: fe 41)");
    // A huge malformed id is shown by its first bytes only.
    byte[] huge = new byte[100_000];
    java.util.Arrays.fill(huge, (byte) 0xC3);
    ConsumerRecord<byte[], byte[]> big = record("message-id", null);
    big.headers().add("message-id", huge);
    assertThatThrownBy(() -> ids.resolve(big, "v"))
        .hasMessageStartingWith("header 'message-id' is not valid UTF-8 (100000 bytes: c3 c3")
        .hasMessageEndingWith("...)").satisfies(e -> assertThat(e.getMessage()).hasSizeLessThan(200));
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
    MessageIds<String> ids = new MessageIds<>("message-id", (record, payload) -> payload == null ? null : "order:" + payload,
        true);
    assertThat(ids.resolve(record("message-id", "header-id"), "42")).isEqualTo("order:42");
    assertThat(ids.resolve(record("message-id", "header-id"), null)).isEqualTo("orders/3/42");
  }
}
