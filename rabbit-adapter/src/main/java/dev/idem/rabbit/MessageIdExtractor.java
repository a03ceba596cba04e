package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import dev.idem.rabbit.internal.HeaderValues;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Finds the deduplication key of a RabbitMQ message.
 *
 * <p>The default, {@link #messageIdProperty()}, reads the AMQP {@code message-id} property.
 * {@link #header(String)} reads an application header (for producers that put an event id
 * there). Any other rule is a lambda. A message for which the extractor returns {@code null} or
 * a blank string is dead-lettered by the pipeline as {@link dev.idem.DeadLetterReason#MISSING_ID}:
 * never processed and never silently dropped.
 *
 * <p>An extractor that throws anything ({@link Error}s included) makes that message an
 * {@link dev.idem.DeadLetterReason#INVALID_ID} dead letter whose error message names the extractor
 * and what it threw; the stream and the channel go on. Throw an {@link IllegalArgumentException}
 * with a clear message for a value that cannot be an id: it becomes the dead letter's error
 * message as it is. An extractor runs on the client's consumer thread: keep it fast and
 * non-blocking.
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
  @Nullable
  String extract(Envelope envelope, AMQP.BasicProperties properties);

  /**
   * The AMQP {@code message-id} property; the default.
   *
   * <p>The client decodes the property as UTF-8 and puts U+FFFD in place of bytes that are not
   * UTF-8, so two different ids could arrive as the same text: a {@code message-id} that contains
   * U+FFFD is rejected ({@link IllegalArgumentException}, hence an
   * {@link dev.idem.DeadLetterReason#INVALID_ID INVALID_ID} dead letter).
   *
   * @return the extractor
   */
  static MessageIdExtractor messageIdProperty() {
    return MessageIdProperty.INSTANCE;
  }

  /**
   * An application header as the id, read strictly:
   * <ul>
   *   <li>text (an AMQP long string or a {@code String}) as it is;</li>
   *   <li>a byte array decoded as UTF-8; bytes that are not valid UTF-8 are rejected, never
   *       replaced (replacement would let two different ids become one);</li>
   *   <li>an integer ({@code byte}, {@code short}, {@code int} or {@code long}) in decimal, e.g.
   *       {@code 42L} is the id {@code "42"}: producers that key events by a database sequence
   *       send numbers. The number {@code 42} and the text {@code "42"} are the same id.</li>
   * </ul>
   * Any other value (a table, an array, a boolean, a floating-point or decimal number, a
   * timestamp) is rejected: its text would depend on the client's formatting. A rejected value
   * throws an {@link IllegalArgumentException} saying what the header holds, and the message is
   * dead-lettered as {@link dev.idem.DeadLetterReason#INVALID_ID INVALID_ID}. A missing header is
   * {@code null} (a {@link dev.idem.DeadLetterReason#MISSING_ID MISSING_ID} dead letter).
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
    public @Nullable String extract(Envelope envelope, AMQP.BasicProperties properties) {
      String id = properties == null ? null : properties.getMessageId();
      return id == null ? null : HeaderValues.checkNoReplacementCharacter("the message-id property", id);
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
    public @Nullable String extract(Envelope envelope, AMQP.BasicProperties properties) {
      Map<String, Object> headers = properties == null ? null : properties.getHeaders();
      return headers == null ? null : HeaderValues.idText(name, headers.get(name));
    }

    @Override
    public String toString() {
      return "header " + name;
    }
  }
}
