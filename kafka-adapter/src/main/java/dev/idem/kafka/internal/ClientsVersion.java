package dev.idem.kafka.internal;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;

/**
 * The version of the kafka-clients jar on the class path, read from the
 * {@code kafka/kafka-version.properties} resource that every kafka-clients release carries
 * (kafka-clients' own {@code AppInfoParser} is not public API and moved in 4.4).
 */
final class ClientsVersion {

  private static final String RESOURCE = "/kafka/kafka-version.properties";

  private ClientsVersion() {}

  /**
   * The version, for example {@code 3.9.1}.
   *
   * @return the version, or {@code "unknown"} when the resource cannot be read
   */
  static String current() {
    try (InputStream in = KafkaConsumer.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        return "unknown";
      }
      Properties properties = new Properties();
      properties.load(in);
      return properties.getProperty("version", "unknown").trim();
    } catch (IOException e) {
      return "unknown";
    }
  }
}
