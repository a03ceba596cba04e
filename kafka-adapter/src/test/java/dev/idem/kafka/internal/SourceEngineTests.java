package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import dev.idem.Delivery;
import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.kafka.testing.LogCapture;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import dev.idem.kafka.testing.TestEngine;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import reactor.test.StepVerifier;

class SourceEngineTests {

  private static ConsumerRecord<byte[], byte[]> record(String value) {
    return new ConsumerRecord<>("orders", 3, 42L, null, value.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void aFailingIdExtractorIsLoggedWithItsErrorTextCutAndTheRecordFallsBackToItsOffsetId() {
    String huge = "x".repeat(100_000);
    KafkaSourceOptions<String> options = KafkaSourceOptions.<String>builder()
        .bootstrapServers("127.0.0.1:1").groupId("g").topics("orders")
        .valueDeserializer(new StrictUtf8Deserializer())
        .messageIdExtractor((record, payload) -> {
          throw new IllegalStateException(huge);
        })
        .build();
    try (SourceEngine<String> engine = new SourceEngine<>(options); LogCapture logs = LogCapture.of("dev.idem.kafka")) {
      Delivery<String> delivery = engine.toDelivery(record("v"), () -> {}, new CommitHolds("g", () -> {}));
      assertThat(delivery.id()).isEqualTo("orders/3/42");
      assertThat(logs.messages(Level.WARN, m -> m.contains("orders-3@42"))).singleElement().satisfies(m -> {
        assertThat(m).contains("IllegalStateException: xxx");
        assertThat(m).hasSizeLessThan(LogText.MAX_TEXT + 200);
      });
    }
  }

  @Test
  void anInvalidConsumerConfigurationEndsTheStreamWithAnErrorNamingItInsteadOfRetryingForever() {
    KafkaSourceOptions<String> options = KafkaSourceOptions.<String>builder()
        .bootstrapServers("127.0.0.1:1").groupId("g").topics("orders")
        .valueDeserializer(new StrictUtf8Deserializer())
        .engine(TestEngine.get())
        .consumerProperty("session.timeout.ms", "soon")
        .build();
    try (SourceEngine<String> engine = new SourceEngine<>(options)) {
      StepVerifier.create(engine.receive())
          .expectErrorSatisfies(error -> assertThat(error)
              .isInstanceOf(IllegalArgumentException.class)
              .hasMessageContaining("Kafka source 'g' cannot create its consumer")
              .hasMessageContaining("session.timeout.ms"))
          .verify(Duration.ofSeconds(30));
    }
  }
}
