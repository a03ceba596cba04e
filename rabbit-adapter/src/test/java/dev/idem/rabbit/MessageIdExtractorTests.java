package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.impl.LongStringHelper;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.Date;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MessageIdExtractorTests {

  private static final Envelope ENVELOPE = new Envelope(1, false, "orders", "orders.created");

  @Test
  void defaultReadsTheMessageIdProperty() {
    AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId("m-1").headers(Map.of("event-id", "e-1")).build();
    assertThat(MessageIdExtractor.messageIdProperty().extract(ENVELOPE, props)).isEqualTo("m-1");
  }

  @Test
  void missingMessageIdPropertyIsNull() {
    assertThat(MessageIdExtractor.messageIdProperty().extract(ENVELOPE, new AMQP.BasicProperties())).isNull();
  }

  @Test
  void headerExtractorReadsTextLongStringIntegersAndUtf8Bytes() {
    MessageIdExtractor header = MessageIdExtractor.header("event-id");
    assertThat(header.extract(ENVELOPE, withHeader(LongStringHelper.asLongString("e-1")))).isEqualTo("e-1");
    assertThat(header.extract(ENVELOPE, withHeader("e-2"))).isEqualTo("e-2");
    assertThat(header.extract(ENVELOPE, withHeader(42L))).isEqualTo("42");
    assertThat(header.extract(ENVELOPE, withHeader(7))).isEqualTo("7");
    assertThat(header.extract(ENVELOPE, withHeader((short) -3))).isEqualTo("-3");
    assertThat(header.extract(ENVELOPE, withHeader((byte) 9))).isEqualTo("9");
    assertThat(header.extract(ENVELOPE, withHeader("e-3".getBytes(StandardCharsets.UTF_8)))).isEqualTo("e-3");
    assertThat(header.extract(ENVELOPE, withHeader(LongStringHelper.asLongString("\u00e9v\u00e9nement-\uD83D\uDE00"))))
        .isEqualTo("\u00e9v\u00e9nement-\uD83D\uDE00");
    assertThat(header.extract(ENVELOPE, new AMQP.BasicProperties.Builder().messageId("m").build())).isNull();
  }

  @Test
  void headerValuesThatAreNotTextBytesOrIntegersAreRejectedNamingWhatTheHeaderHolds() {
    MessageIdExtractor header = MessageIdExtractor.header("event-id");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(Map.of("k", "v"))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("header 'event-id' holds a table (")
        .hasMessageEndingWith("not text, bytes or an integer, so it cannot be a message id");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(List.of("a"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("header 'event-id' holds an array (");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(4.2d)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("java.lang.Double");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(1.5f)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("java.lang.Float");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(new BigDecimal("1.0"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("java.math.BigDecimal");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(true)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("java.lang.Boolean");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(new Date(0))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("java.util.Date");
  }

  @Test
  void bytesThatAreNotUtf8AreRejectedSoThatTwoDifferentIdsNeverBecomeOne() {
    MessageIdExtractor header = MessageIdExtractor.header("event-id");
    // Lenient decoding turns both into "\uFFFDid".
    byte[] first = {(byte) 0xFF, 'i', 'd'};
    byte[] second = {(byte) 0xFE, 'i', 'd'};
    assertThat(new String(first, StandardCharsets.UTF_8)).isEqualTo(new String(second, StandardCharsets.UTF_8));
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(first)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "header 'event-id' holds 3 bytes that are not valid UTF-8 (MalformedInputException), so it cannot be a message id");
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(LongStringHelper.asLongString(second))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("header 'event-id' holds 3 bytes that are not valid UTF-8");
    // A lone surrogate half encoded as CESU-8 / modified UTF-8 is not UTF-8 either.
    assertThatThrownBy(() -> header.extract(ENVELOPE, withHeader(new byte[]{(byte) 0xED, (byte) 0xA0, (byte) 0x80})))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void textTheClientAlreadyDecodedWithReplacementCharactersIsRejected() {
    AMQP.BasicProperties replaced = new AMQP.BasicProperties.Builder().messageId("\uFFFDid").build();
    assertThatThrownBy(() -> MessageIdExtractor.messageIdProperty().extract(ENVELOPE, replaced))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("the message-id property contains U+FFFD");
    assertThatThrownBy(() -> MessageIdExtractor.header("event-id").extract(ENVELOPE, withHeader("\uFFFDid")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("header 'event-id' contains U+FFFD");
  }

  @Test
  void aHugeHeaderNameIsCutInTheError() {
    String name = "n".repeat(10_000);
    assertThatThrownBy(() -> MessageIdExtractor.header(name).extract(ENVELOPE,
        new AMQP.BasicProperties.Builder().headers(Map.of(name, List.of())).build()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("header '" + "n".repeat(255) + "...(9745 more characters)' holds an array");
  }

  @Test
  void headerNameMustNotBeBlank() {
    assertThatThrownBy(() -> MessageIdExtractor.header(" ")).hasMessageContaining("messageId header");
  }

  @Test
  void customExtractorIsALambda() {
    MessageIdExtractor byRoutingKey = (envelope, props) -> envelope.getRoutingKey() + ":" + props.getCorrelationId();
    assertThat(byRoutingKey.extract(ENVELOPE, new AMQP.BasicProperties.Builder().correlationId("c").build()))
        .isEqualTo("orders.created:c");
  }

  private static AMQP.BasicProperties withHeader(Object value) {
    return new AMQP.BasicProperties.Builder().headers(Map.of("event-id", value)).build();
  }
}
