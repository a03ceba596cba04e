package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.ConnectionFactory;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class RabbitSourceOptionsTests {

  @Test
  void defaultsAreDocumentedConstants() {
    RabbitSourceOptions options = RabbitSourceOptions.builder("payments").build();
    assertThat(options.uri()).isEqualTo(RabbitSourceOptions.DEFAULT_URI);
    assertThat(options.prefetch()).isEqualTo(RabbitSourceOptions.DEFAULT_PREFETCH);
    assertThat(options.deadLetterMode()).isEqualTo(DeadLetterMode.PUBLISH_WITH_CONFIRMS);
    assertThat(options.deadLetterExchange()).isEqualTo("payments.dlx").isEqualTo(RabbitTopology.deadLetterExchange("payments"));
    assertThat(options.deadLetterRoutingKey()).isEqualTo("payments");
    assertThat(options.connectionName()).isEqualTo("idem-payments");
    assertThat(options.messageId()).isSameAs(MessageIdExtractor.messageIdProperty());
    assertThat(options.recoveryBackoff()).isEqualTo(RabbitSourceOptions.DEFAULT_RECOVERY_BACKOFF);
    assertThat(options.maxRecoveryBackoff()).isEqualTo(RabbitSourceOptions.DEFAULT_MAX_RECOVERY_BACKOFF);
    assertThat(options.confirmTimeout()).isEqualTo(RabbitSourceOptions.DEFAULT_CONFIRM_TIMEOUT);
  }

  @Test
  void invalidSettingsAreRejectedNamingTheSetting() {
    assertThatThrownBy(() -> RabbitSourceOptions.builder(" ").build()).hasMessageContaining("queue");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q".repeat(256)).build()).hasMessageContaining("queue");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("amq.foo").build()).hasMessageContaining("queue");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").prefetch(0).build()).hasMessageContaining("prefetch");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").prefetch(65_536).build()).hasMessageContaining("prefetch");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").uri("http://x").build()).hasMessageContaining("uri");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").uri("amqp://a b").build()).hasMessageContaining("uri");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").connectionName(" ").build()).hasMessageContaining("connectionName");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").deadLetterTo("", "q").build()).hasMessageContaining("deadLetterTo");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").deadLetterTo("", "").build()).hasMessageContaining("deadLetterRoutingKey");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").recoveryBackoff(Duration.ZERO, Duration.ofSeconds(1)).build())
        .hasMessageContaining("recoveryBackoff");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").recoveryBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)).build())
        .hasMessageContaining("maxRecoveryBackoff");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").confirmTimeout(Duration.ofSeconds(-1)).build())
        .hasMessageContaining("confirmTimeout");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").messageId(null)).hasMessageContaining("messageId");
  }

  @Test
  void toStringMasksThePassword() {
    RabbitSourceOptions options = RabbitSourceOptions.builder("q").uri("amqp://alice:s3cret@broker:5672/vh").build();
    assertThat(options.toString()).contains("amqp://alice:****@broker:5672/vh").doesNotContain("s3cret");
    assertThat(RabbitSourceOptions.maskPassword("amqps://bob@host")).isEqualTo("amqps://bob@host");
  }

  @Test
  void connectionFactoryHasAutomaticRecoveryOffWhateverTheCustomizerSays() {
    ConnectionFactory factory = RabbitSourceOptions.builder("q")
        .uri("amqp://alice:s3cret@broker:5673/vh")
        .connectionFactoryCustomizer(f -> f.setAutomaticRecoveryEnabled(true))
        .build()
        .newConnectionFactory();
    assertThat(factory.isAutomaticRecoveryEnabled()).isFalse();
    assertThat(factory.getHost()).isEqualTo("broker");
    assertThat(factory.getPort()).isEqualTo(5673);
    assertThat(factory.getVirtualHost()).isEqualTo("vh");
    assertThat(factory.getUsername()).isEqualTo("alice");
  }
}
