package dev.idem.kafka.testing;

import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaSourceOptions;
import java.util.Locale;

/**
 * The engine the Kafka tests run on: the system property {@value #PROPERTY} ({@code native},
 * the default, or {@code reactor-kafka}), so that one suite covers both engines
 * ({@code mvn verify -Didem.test.kafka.engine=reactor-kafka}; kafka-clients 3.x only); and the
 * consumer group protocol, {@value #GROUP_PROTOCOL_PROPERTY} ({@code classic}, the default, or
 * Kafka 4's {@code consumer}).
 */
public final class TestEngine {

  /** The system property naming the engine. */
  public static final String PROPERTY = "idem.test.kafka.engine";

  /** The system property naming the consumers' {@code group.protocol}. */
  public static final String GROUP_PROTOCOL_PROPERTY = "idem.test.kafka.group-protocol";

  private TestEngine() {}

  /**
   * Sets the engine and the group protocol the tests run on.
   *
   * @param builder a test's options
   * @param <T> the payload type
   * @return the builder
   */
  public static <T> KafkaSourceOptions.Builder<T> apply(KafkaSourceOptions.Builder<T> builder) {
    builder.engine(get());
    if (consumerGroupProtocol()) {
      builder.consumerProperty("group.protocol", "consumer");
    }
    return builder;
  }

  /**
   * Whether the tests run on Kafka 4's consumer group protocol.
   *
   * @return {@code true} for {@code -Didem.test.kafka.group-protocol=consumer}
   * @throws IllegalArgumentException naming the accepted values when the property is unknown
   */
  public static boolean consumerGroupProtocol() {
    String protocol = System.getProperty(GROUP_PROTOCOL_PROPERTY, "").trim();
    if (protocol.isEmpty() || protocol.equalsIgnoreCase("classic")) {
      return false;
    }
    if (protocol.equalsIgnoreCase("consumer")) {
      return true;
    }
    throw new IllegalArgumentException(
        GROUP_PROTOCOL_PROPERTY + "=" + protocol + " is not a group protocol; use classic or consumer");
  }

  /**
   * The engine the tests run on.
   *
   * @return the engine
   * @throws IllegalArgumentException naming the accepted values when the property is unknown
   */
  public static KafkaEngine get() {
    String value = System.getProperty(PROPERTY, "");
    if (value.isBlank()) {
      return KafkaEngine.NATIVE;
    }
    try {
      return KafkaEngine.valueOf(value.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(PROPERTY + "=" + value + " is not an engine; use native or reactor-kafka", e);
    }
  }
}
