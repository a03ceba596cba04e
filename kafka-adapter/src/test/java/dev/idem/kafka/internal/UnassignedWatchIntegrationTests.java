package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.LogCapture;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/** A consumer that gets no partition says so, and names a topic the cluster does not have. */
class UnassignedWatchIntegrationTests {

  @Test
  void aSourceOnATopicThatDoesNotExistSaysSoInsteadOfWaitingSilently() {
    KafkaService kafka = KafkaService.get();
    String name = KafkaService.uniqueName("missing");
    String topic = name + "_no_such_topic";
    KafkaSourceOptions<String> options = KafkaSourceOptions.<String>builder()
        .bootstrapServers(kafka.bootstrapServers()).groupId(name + "_group").topics(topic)
        .valueDeserializer(new StrictUtf8Deserializer())
        .consumerProperty("allow.auto.create.topics", false)
        .closeTimeout(Duration.ofSeconds(5))
        .build();
    NativeReceiver receiver = new NativeReceiver(options, SourceEngine.consumerProperties(options), consumer -> null,
        Duration.ofSeconds(1));
    AtomicInteger received = new AtomicInteger();
    try (LogCapture logs = LogCapture.of("dev.idem.kafka")) {
      Disposable running = receiver.receive(new CommitHolds(name, () -> {})).subscribe(r -> received.incrementAndGet());
      try {
        await().atMost(Duration.ofSeconds(60))
            .untilAsserted(() -> assertThat(logs.messages(Level.WARN, m -> m.contains("has had no partition of [" + topic + "]")))
                .anySatisfy(m -> assertThat(m).contains("the cluster has no topic [" + topic + "]")));
      } finally {
        running.dispose();
        receiver.close();
      }
    }
    assertThat(received).hasValue(0);
    assertThat(kafka.admin().listTopics().names().toCompletionStage().toCompletableFuture().join()).doesNotContain(topic);
  }
}
