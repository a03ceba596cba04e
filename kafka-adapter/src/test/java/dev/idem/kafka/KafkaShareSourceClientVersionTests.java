package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.kafka.testing.StrictUtf8Deserializer;
import java.io.InputStream;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.junit.jupiter.api.Test;

/**
 * {@link KafkaShareSource} on the kafka-clients under test (the compatibility matrix runs this on
 * 3.9.1, the root pom's 4.1 and newer): before 4.1 creating it fails at once, naming the version
 * found and the version needed; from 4.1 on it is created (nothing connects until subscribed).
 */
class KafkaShareSourceClientVersionTests {

  @Test
  void creatingTheSourceFailsAtOnceBeforeKafkaClients41AndSucceedsFromIt() throws Exception {
    String version = clientsVersion();
    KafkaSourceOptions<String> options = KafkaSourceOptions.<String>builder().bootstrapServers("127.0.0.1:1")
        .groupId("orders-queue")
        .topics("orders").valueDeserializer(new StrictUtf8Deserializer()).build();
    String[] parts = version.split("[.-]");
    boolean before41 = Integer.parseInt(parts[0]) < 4 || Integer.parseInt(parts[0]) == 4 && Integer.parseInt(parts[1]) < 1;
    if (before41) {
      assertThatThrownBy(() -> KafkaShareSource.create(options)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("Kafka share source 'orders-queue' needs kafka-clients 4.1 or later")
          .hasMessageContaining("kafka-clients " + version + " is on the class path");
    } else {
      try (KafkaShareSource<String> source = KafkaShareSource.create(options, 3)) {
        assertThat(source.consumers()).isEqualTo(3);
      }
    }
  }

  @Test
  void aShareSourceNeedsAtLeastOneConsumerAndTheNativeEngine() throws Exception {
    String version = clientsVersion();
    if (version.startsWith("3.") || version.startsWith("4.0")) {
      return; // such clients are refused before these checks: see the test above
    }
    KafkaSourceOptions.Builder<String> options = KafkaSourceOptions.<String>builder().bootstrapServers("127.0.0.1:1")
        .groupId("orders-queue")
        .topics("orders").valueDeserializer(new StrictUtf8Deserializer());
    assertThatThrownBy(() -> KafkaShareSource.create(options.build(), 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("consumers must be at least 1, was 0");
    assertThatThrownBy(() -> KafkaShareSource.create(options.engine(KafkaEngine.REACTOR_KAFKA).build()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Reactor Kafka has no share consumer");
  }

  private static String clientsVersion() throws Exception {
    try (InputStream in = KafkaConsumer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      Properties properties = new Properties();
      properties.load(in);
      return properties.getProperty("version").trim();
    }
  }
}
