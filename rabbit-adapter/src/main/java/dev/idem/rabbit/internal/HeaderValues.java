package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.LongString;
import dev.idem.internal.LogText;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/** Renders AMQP header values and properties as strings for {@link dev.idem.Delivery#headers()}. */
public final class HeaderValues {

  /** Prefix of AMQP properties and envelope fields in the rendered map. */
  public static final String PROPERTY_PREFIX = "amqp.";

  private HeaderValues() {}

  /**
   * Renders one header value: text types as text, byte arrays as UTF-8, everything else with
   * {@code toString()}.
   *
   * @param value the value, may be {@code null}
   * @return the text or {@code null}
   */
  public static @Nullable String render(@Nullable Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof LongString longString) {
      return new String(longString.getBytes(), StandardCharsets.UTF_8);
    }
    if (value instanceof byte[] bytes) {
      return new String(bytes, StandardCharsets.UTF_8);
    }
    if (value instanceof List<?> list) {
      return list.stream().map(HeaderValues::render).toList().toString();
    }
    if (value instanceof Map<?, ?> map) {
      Map<String, String> rendered = new LinkedHashMap<>();
      map.forEach((k, v) -> rendered.put(String.valueOf(k), render(v)));
      return rendered.toString();
    }
    return value.toString();
  }

  /**
   * All application headers plus the AMQP properties and envelope fields (prefixed with
   * {@value #PROPERTY_PREFIX}, e.g. {@code amqp.message-id}, {@code amqp.routing-key}).
   *
   * @param envelope the envelope
   * @param properties the properties
   * @return an unmodifiable map without null values
   */
  public static Map<String, String> renderAll(Envelope envelope, AMQP.BasicProperties properties) {
    Map<String, String> out = new LinkedHashMap<>();
    if (properties != null) {
      if (properties.getHeaders() != null) {
        properties.getHeaders().forEach((k, v) -> putIfPresent(out, k, render(v)));
      }
      putIfPresent(out, PROPERTY_PREFIX + "message-id", properties.getMessageId());
      putIfPresent(out, PROPERTY_PREFIX + "correlation-id", properties.getCorrelationId());
      putIfPresent(out, PROPERTY_PREFIX + "content-type", properties.getContentType());
      putIfPresent(out, PROPERTY_PREFIX + "content-encoding", properties.getContentEncoding());
      putIfPresent(out, PROPERTY_PREFIX + "type", properties.getType());
      putIfPresent(out, PROPERTY_PREFIX + "app-id", properties.getAppId());
      putIfPresent(out, PROPERTY_PREFIX + "user-id", properties.getUserId());
      putIfPresent(out, PROPERTY_PREFIX + "reply-to", properties.getReplyTo());
    }
    if (envelope != null) {
      putIfPresent(out, PROPERTY_PREFIX + "exchange", envelope.getExchange());
      putIfPresent(out, PROPERTY_PREFIX + "routing-key", envelope.getRoutingKey());
      out.put(PROPERTY_PREFIX + "redelivered", Boolean.toString(envelope.isRedeliver()));
    }
    return Collections.unmodifiableMap(out);
  }

  /**
   * A header value as a message id, strictly: text ({@code String}, AMQP long string) as it is,
   * bytes decoded as UTF-8 with malformed input reported rather than replaced, and integers
   * ({@code byte}, {@code short}, {@code int}, {@code long}) in decimal. Anything else (a table, an
   * array, a boolean, a floating-point or decimal number, a timestamp) is not an id: rendering it
   * with {@code toString()} would make an id that depends on the client's formatting.
   *
   * @param header the header name, for the error message
   * @param value the value, may be {@code null}
   * @return the id, or {@code null} when the value is {@code null}
   * @throws IllegalArgumentException when the value cannot be an id, saying why
   */
  public static @Nullable String idText(String header, @Nullable Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof String text) {
      return checkNoReplacementCharacter("header '" + LogText.id(header) + "'", text);
    }
    if (value instanceof LongString longString) {
      return strictUtf8("header '" + LogText.id(header) + "'", longString.getBytes());
    }
    if (value instanceof byte[] bytes) {
      return strictUtf8("header '" + LogText.id(header) + "'", bytes);
    }
    if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
      return Long.toString(((Number) value).longValue());
    }
    throw new IllegalArgumentException("header '" + LogText.id(header) + "' holds " + describeType(value)
        + ", not text, bytes or an integer, so it cannot be a message id");
  }

  /**
   * Rejects a text the client already decoded leniently (the {@code message-id} property, a
   * short-string header) when it contains U+FFFD, the character the client puts in place of bytes
   * that are not UTF-8: two different ids could have become the same text.
   *
   * @param source what the text came from, for the error message
   * @param text the text
   * @return the text
   * @throws IllegalArgumentException when the text contains U+FFFD
   */
  public static String checkNoReplacementCharacter(String source, String text) {
    if (text.indexOf('\uFFFD') >= 0) {
      throw new IllegalArgumentException(source + " contains U+FFFD, the replacement character the client puts in"
          + " place of bytes that are not valid UTF-8; it cannot be a message id, as two different ids could read the same");
    }
    return text;
  }

  private static String strictUtf8(String source, byte[] bytes) {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes))
          .toString();
    } catch (CharacterCodingException e) {
      throw new IllegalArgumentException(source + " holds " + bytes.length + " bytes that are not valid UTF-8 ("
          + e.getClass().getSimpleName() + "), so it cannot be a message id", e);
    }
  }

  private static String describeType(Object value) {
    if (value instanceof Map<?, ?>) {
      return "a table (" + value.getClass().getName() + ")";
    }
    if (value instanceof List<?> || value.getClass().isArray()) {
      return "an array (" + value.getClass().getName() + ")";
    }
    return "a value of type " + value.getClass().getName();
  }

  private static void putIfPresent(Map<String, String> map, @Nullable String key, @Nullable String value) {
    if (key != null && value != null) {
      map.put(key, value);
    }
  }
}
