package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.LongString;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
  public static String render(Object value) {
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

  private static void putIfPresent(Map<String, String> map, String key, String value) {
    if (key != null && value != null) {
      map.put(key, value);
    }
  }
}
