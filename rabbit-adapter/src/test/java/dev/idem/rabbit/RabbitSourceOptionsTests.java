package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.rabbitmq.client.ConnectionFactory;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

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
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").deadLetterTo("", "").build())
        .hasMessageContaining("deadLetterRoutingKey");
    assertThatThrownBy(() -> RabbitSourceOptions.builder("q").recoveryBackoff(Duration.ZERO, Duration.ofSeconds(1)).build())
        .hasMessageContaining("recoveryBackoff");
    assertThatThrownBy(
        () -> RabbitSourceOptions.builder("q").recoveryBackoff(Duration.ofSeconds(2), Duration.ofSeconds(1)).build())
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
  void upperCaseSchemeIsAcceptedLikeTheClientDoesAndMasked() {
    RabbitSourceOptions options = RabbitSourceOptions.builder("q").uri("AMQP://user:secret@host:5672").build();
    assertThat(options.toString()).contains("AMQP://user:****@host:5672").doesNotContain("secret");
    ConnectionFactory factory = options.newConnectionFactory();
    assertThat(factory.getHost()).isEqualTo("host");
    assertThat(factory.getPort()).isEqualTo(5672);
    assertThat(factory.getPassword()).isEqualTo("secret");
    assertThat(RabbitSourceOptions.builder("q").uri("AmQpS://user:secret@host").build().toString())
        .contains("AmQpS://user:****@host").doesNotContain("secret");
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', nullValues = "NULL", value = {
      "amqp://alice:s3cret@broker:5672/vh          | amqp://alice:****@broker:5672/vh",
      "AMQP://alice:s3cret@broker:5672             | AMQP://alice:****@broker:5672",
      "AmQpS://alice:s3cret@broker                 | AmQpS://alice:****@broker",
      "amqps://alice:s3cret@broker/vh              | amqps://alice:****@broker/vh",
      "amqp://alice:p%40ss%2Fw0rd@broker/vh        | amqp://alice:****@broker/vh",
      "amqp://alice:p@ss/w:rd@broker/vh            | amqp://alice:****@broker/vh",
      "amqp://alice:@broker                        | amqp://alice:****@broker",
      "amqp://alice:se cret@bro ker                | amqp://alice:****@bro ker",
      "alice:s3cret@broker                         | alice:****@broker",
      "HTTP://alice:s3cret@broker                  | HTTP://alice:****@broker",
      "amqp://broker?heartbeat=10&password=s3cret  | amqp://broker?heartbeat=10&password=****",
      "amqps://bob@host                            | amqps://bob@host",
      "amqp://broker:5672/vh                       | amqp://broker:5672/vh",
      "amqp://                                     | amqp://",
      "not a uri at all                            | not a uri at all",
      "NULL                                        | NULL"})
  void maskPasswordHidesThePasswordWhateverTheShapeOfTheUri(String uri, String masked) {
    assertThat(RabbitSourceOptions.maskPassword(uri)).isEqualTo(masked);
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "HTTP://user:TopSecret1@host:5672",
      "AMQP://user:TopSecret1@ho st:5672",
      "amqps://user:TopSecret1@ho st",
      "amqp://user:Top Secret1@host",
      "amqp://user:TopSecret1%zz@host",
      "amqp://user:TopSecret1@",
      "amqp://user:TopSecret1@ho_st:5672",
      "user:TopSecret1@host",
      "amqp://user:TopSecret1@host:5672/%zz",
      "amqp://user:TopSecret1@host:notaport"})
  void noErrorAboutABadUriShowsThePassword(String uri) {
    Throwable error = catchThrowable(() -> RabbitSourceOptions.builder("q").uri(uri).build().newConnectionFactory());
    assertThat(error).as(uri).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uri");
    StringWriter trace = new StringWriter();
    error.printStackTrace(new PrintWriter(trace));
    assertThat(trace.toString()).as("stack trace of the error about " + uri)
        .doesNotContain("Secret1").doesNotContain("TopSecret").doesNotContain("Top Secret");
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
