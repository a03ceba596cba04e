package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import dev.idem.rabbit.internal.HeaderValues;
import java.util.Map;
import java.util.Objects;

/**
 * Finds the deduplication key of a RabbitMQ message.
 *
 * <p>The default, {@link #messageIdProperty()}, reads the AMQP {@code message-id} property.
 * {@link #header(String)} reads an application header (for producers that put an event id
 * there). Any other rule is a lambda. A message for which the extractor returns {@code null} or
 * a blank string is dead-lettered by the pipeline as {@link dev.idem.DeadLetterReason#MISSING_ID}:
 * never processed and never silently dropped. An extractor that throws is treated the same way.
 */
@FunctionalInterface
public interface MessageIdExtractor {

  /**
   * Extracts the id.
   *
   * @param envelope the delivery's envelope (exchange, routing key, redelivered flag)
   * @param properties the message's AMQP properties
   * @return the id, or {@code null} when the message has none
   */
  String extract(Envelope envelope, AMQP.BasicProperties properties);

  /**
   * The AMQP {@code message-id} property; the default.
   *
   * @return the extractor
   */
  static MessageIdExtractor messageIdProperty() {
    return MessageIdProperty.INSTANCE;
  }

  /**
   * An application header rendered as a string ({@code long} and byte-array values too).
   *
   * @param name the header name, not blank
   * @return the extractor
   */
  static MessageIdExtractor header(String name) {
    Objects.requireNonNull(name, "header name");
    if (name.isBlank()) {
      throw new IllegalArgumentException("messageId header name must not be blank");
    }
    return new Header(name);
  }

  /** Reads the {@code message-id} property. */
  enum MessageIdProperty implements MessageIdExtractor {
    /** The only instance. */
    INSTANCE;

    @Override
    public String extract(Envelope envelope, AMQP.BasicProperties properties) {
      return properties == null ? null : properties.getMessageId();
    }

    @Override
    public String toString() {
      return "property message-id";
    }
  }

  /**
   * Reads an application header.
   *
   * @param name the header name
   */
  record Header(String name) implements MessageIdExtractor {
    @Override
    public String extract(Envelope envelope, AMQP.BasicProperties properties) {
      Map<String, Object> headers = properties == null ? null : properties.getHeaders();
      return headers == null ? null : HeaderValues.render(headers.get(name));
    }

    @Override
    public String toString() {
      return "header " + name;
    }
  }
}
