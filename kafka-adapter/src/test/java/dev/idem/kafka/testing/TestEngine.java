package dev.idem.kafka.testing;

import dev.idem.kafka.KafkaEngine;
import java.util.Locale;

/**
 * The engine the Kafka tests run on: the system property {@value #PROPERTY} ({@code native},
 * the default, or {@code reactor-kafka}), so that one suite covers both engines
 * ({@code mvn verify -Didem.test.kafka.engine=reactor-kafka}; kafka-clients 3.x only).
 */
public final class TestEngine {

  /** The system property naming the engine. */
  public static final String PROPERTY = "idem.test.kafka.engine";

  private TestEngine() {}

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
