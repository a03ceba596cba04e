package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.IdempotentConsumer;
import java.time.Duration;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

class KafkaSourceOptionsTests {

  private static KafkaSourceOptions.Builder<String> valid() {
    return KafkaSourceOptions.<String>builder()
        .bootstrapServers("localhost:9092").groupId("g").topics("orders")
        .valueDeserializer(new StringDeserializer());
  }

  @Test
  void defaultsAreTheDocumentedConstants() {
    KafkaSourceOptions<String> options = valid().build();
    assertThat(options.messageIdHeader()).isEqualTo("message-id").isEqualTo(KafkaSourceOptions.DEFAULT_MESSAGE_ID_HEADER);
    assertThat(options.prefetch()).isEqualTo(IdempotentConsumer.DEFAULT_PREFETCH);
    assertThat(options.maxDeferredCommits()).isEqualTo(KafkaSourceOptions.DEFAULT_MAX_DEFERRED_COMMITS);
    assertThat(options.commitInterval()).isEqualTo(KafkaSourceOptions.DEFAULT_COMMIT_INTERVAL);
    assertThat(options.commitBatchSize()).isEqualTo(KafkaSourceOptions.DEFAULT_COMMIT_BATCH_SIZE);
    assertThat(options.revocationGracePeriod()).isEqualTo(KafkaSourceOptions.DEFAULT_REVOCATION_GRACE_PERIOD);
    assertThat(options.offsetFallbackId()).isTrue();
    assertThat(options.messageIdExtractor()).isNull();
    assertThat(options.deadLetterTopic("orders")).isEqualTo("orders.DLT");
    assertThat(options.meterRegistry()).isNull();
  }

  @Test
  void deadLetterTopicNamingIsConfigurable() {
    assertThat(valid().deadLetterTopicSuffix("-dead").build().deadLetterTopic("orders")).isEqualTo("orders-dead");
    assertThat(valid().deadLetterTopic(t -> "dlq." + t).build().deadLetterTopic("orders")).isEqualTo("dlq.orders");
  }

  @Test
  void missingRequiredSettingsAreNamed() {
    assertThatThrownBy(
        () -> KafkaSourceOptions.<String>builder().groupId("g").topics("t").valueDeserializer(new StringDeserializer()).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bootstrapServers");
    assertThatThrownBy(() -> KafkaSourceOptions.<String>builder().bootstrapServers("b").topics("t")
        .valueDeserializer(new StringDeserializer()).build())
        .hasMessageContaining("groupId");
    assertThatThrownBy(() -> KafkaSourceOptions.<String>builder().bootstrapServers("b").groupId("g")
        .valueDeserializer(new StringDeserializer()).build())
        .hasMessageContaining("topics");
    assertThatThrownBy(() -> KafkaSourceOptions.<String>builder().bootstrapServers("b").groupId("g").topics("t").build())
        .hasMessageContaining("valueDeserializer");
  }

  @Test
  void invalidValuesAreRejectedNamingTheSetting() {
    assertThatThrownBy(() -> valid().prefetch(0).build()).hasMessageContaining("prefetch");
    assertThatThrownBy(() -> valid().maxDeferredCommits(0).build()).hasMessageContaining("maxDeferredCommits");
    assertThatThrownBy(() -> valid().commitBatchSize(-1).build()).hasMessageContaining("commitBatchSize");
    assertThatThrownBy(() -> valid().commitInterval(Duration.ZERO)).hasMessageContaining("commitInterval");
    assertThatThrownBy(() -> valid().revocationGracePeriod(Duration.ofSeconds(-1))).hasMessageContaining("revocationGracePeriod");
    assertThatThrownBy(() -> valid().groupId(" ")).hasMessageContaining("groupId");
    assertThatThrownBy(() -> valid().reconnectBackoff(Duration.ofSeconds(5), Duration.ofSeconds(1)).build())
        .hasMessageContaining("reconnectBackoff");
  }

  @Test
  void settingsTheSourceOwnsCannotBeOverridden() {
    assertThatThrownBy(() -> valid().consumerProperty("enable.auto.commit", "true").build())
        .hasMessageContaining("enable.auto.commit");
    assertThatThrownBy(() -> valid().consumerProperty("value.deserializer", StringDeserializer.class).build())
        .hasMessageContaining("value.deserializer");
    assertThatThrownBy(() -> valid().producerProperty("acks", "1").build()).hasMessageContaining("acks");
    assertThat(valid().consumerProperty("enable.auto.commit", false).build().consumerProperties())
        .containsEntry("enable.auto.commit", false);
  }

  @Test
  void revocationGracePeriodMustBeShorterThanTheMaxPollInterval() {
    assertThatThrownBy(
        () -> valid().consumerProperty("max.poll.interval.ms", 5000).revocationGracePeriod(Duration.ofSeconds(5)).build())
        .hasMessageContaining("revocationGracePeriod").hasMessageContaining("max.poll.interval.ms");
    assertThat(valid().consumerProperty("max.poll.interval.ms", 5000).revocationGracePeriod(Duration.ofSeconds(4)).build())
        .isNotNull();
  }

  @Test
  void toStringMasksSecrets() {
    KafkaSourceOptions<String> options = valid()
        .consumerProperty("sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";")
        .consumerProperty("ssl.truststore.password", "hunter2")
        .producerProperty("ssl.key.password", "hunter2")
        .consumerProperty("security.protocol", "SASL_SSL")
        .build();
    assertThat(options.toString()).doesNotContain("hunter2").contains("******").contains("SASL_SSL").contains("orders");
  }

  @Test
  void optionsAreImmutable() {
    KafkaSourceOptions<String> options = valid().consumerProperty("a", 1).build();
    assertThatThrownBy(() -> options.consumerProperties().put("b", 2)).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> options.topics().add("x")).isInstanceOf(UnsupportedOperationException.class);
  }
}
