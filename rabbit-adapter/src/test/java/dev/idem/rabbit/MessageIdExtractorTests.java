package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.impl.LongStringHelper;
import java.nio.charset.StandardCharsets;
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
  void headerExtractorRendersTextLongStringNumbersAndBytes() {
    MessageIdExtractor header = MessageIdExtractor.header("event-id");
    assertThat(header.extract(ENVELOPE, withHeader(LongStringHelper.asLongString("e-1")))).isEqualTo("e-1");
    assertThat(header.extract(ENVELOPE, withHeader("e-2"))).isEqualTo("e-2");
    assertThat(header.extract(ENVELOPE, withHeader(42L))).isEqualTo("42");
    assertThat(header.extract(ENVELOPE, withHeader("e-3".getBytes(StandardCharsets.UTF_8)))).isEqualTo("e-3");
    assertThat(header.extract(ENVELOPE, new AMQP.BasicProperties.Builder().messageId("m").build())).isNull();
  }

  @Test
  void headerNameMustNotBeBlank() {
    assertThatThrownBy(() -> MessageIdExtractor.header(" ")).hasMessageContaining("messageId header");
  }

  @Test
  void customExtractorIsALambda() {
    MessageIdExtractor byRoutingKey = (envelope, props) -> envelope.getRoutingKey() + ":" + props.getCorrelationId();
    assertThat(byRoutingKey.extract(ENVELOPE, new AMQP.BasicProperties.Builder().correlationId("c").build())).isEqualTo("orders.created:c");
  }

  private static AMQP.BasicProperties withHeader(Object value) {
    return new AMQP.BasicProperties.Builder().headers(Map.of("event-id", value)).build();
  }
}
