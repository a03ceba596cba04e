package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.postgres.PostgresInbox;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** Misconfiguration fails at build time, naming the setting. No database is contacted. */
class IdempotentConsumerBuilderTests {

  // Creating a factory does not connect; nothing here reaches a server.
  private final ConnectionFactory unused = ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");
  private final PostgresInbox inbox = PostgresInbox.create(unused);
  private final Handler<String> handler = (payload, tx) -> Mono.empty();

  @Test
  void blankConsumerNameIsRejected() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named(" ").inbox(inbox).handler(handler).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("consumer name");
    assertThatThrownBy(() -> IdempotentConsumer.<String>named(null).inbox(inbox).handler(handler).build())
        .hasMessageContaining("consumer name");
  }

  @Test
  void batchSettingsAreCheckedByName() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).maxBatchSize(0).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxBatchSize");
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").batchMaxWait(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batchMaxWait");
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler)
        .batchHandler((items, tx) -> Mono.empty()).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("either handler or batchHandler");
    assertThat(
        IdempotentConsumer.<String>named("c").inbox(inbox).batchHandler((items, tx) -> Mono.empty()).maxBatchSize(64).build())
        .isNotNull();
  }

  @Test
  void failurePathSettingsAreCheckedByName() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").stuckWarningInterval(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("stuckWarningInterval");
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").serverTimeouts(null))
        .isInstanceOf(NullPointerException.class).hasMessageContaining("serverTimeouts");
    assertThatThrownBy(() -> RetryPolicy.defaults().withMaxContentionRetries(-1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxContentionRetries");
  }

  @Test
  void missingInboxIsRejected() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").handler(handler).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inbox is required");
  }

  @Test
  void missingHandlerIsRejected() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).build())
        .hasMessageContaining("handler is required");
  }

  @Test
  void concurrencyBelowOneIsRejected() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).concurrency(0).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessage("concurrency must be at least 1, was 0");
  }

  @Test
  void prefetchAndMaxIdLengthBelowOneAreRejected() {
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).prefetch(0).build())
        .hasMessageContaining("prefetch");
    assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).maxIdLength(0).build())
        .hasMessageContaining("maxIdLength");
  }

  @Test
  void tableNamesThatAreNotPlainIdentifiersAreRejected() {
    assertThatThrownBy(() -> PostgresInbox.create(unused, "processed; DROP TABLE accounts"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("table must be a plain SQL identifier");
    assertThatThrownBy(() -> PostgresInbox.create(unused, "1abc")).hasMessageContaining("table");
    assertThat(PostgresInbox.create(unused, "idem.processed_messages").table()).isEqualTo("idem.processed_messages");
  }

  @Test
  void retryPolicyValidatesItsSettings() {
    assertThatThrownBy(() -> RetryPolicy.backoff(0, Duration.ofMillis(1))).hasMessageContaining("maxAttempts");
    assertThatThrownBy(() -> RetryPolicy.backoff(3, Duration.ZERO)).hasMessageContaining("firstBackoff");
    assertThat(RetryPolicy.defaults().maxAttempts()).isEqualTo(RetryPolicy.DEFAULT_MAX_ATTEMPTS);
  }

  @Test
  void defaultsAreDocumentedConstants() {
    IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).build();
    assertThat(consumer.toString())
        .contains("concurrency=" + IdempotentConsumer.DEFAULT_CONCURRENCY)
        .contains("prefetch=" + IdempotentConsumer.DEFAULT_PREFETCH)
        .contains("ordering=" + IdempotentConsumer.DEFAULT_ORDERING)
        .contains("slowMessageThreshold=" + IdempotentConsumer.DEFAULT_SLOW_MESSAGE_THRESHOLD);
    String forced = System.getProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
    // CI runs the whole suite again with -Didem.maxBatchSize=1: this line shows that it reached the tests.
    assertThat(consumer.toString())
        .contains("maxBatchSize=" + (forced != null ? forced : IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE));
  }

  @Test
  void theSystemPropertyReplacesTheDefaultMaxBatchSizeAndABadValueIsNamed() {
    String before = System.getProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
    try {
      System.setProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY, "7");
      assertThat(IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).build().toString())
          .contains("maxBatchSize=7");
      assertThat(IdempotentConsumer.<String>named("c").inbox(inbox).handler(handler).maxBatchSize(3).build().toString())
          .as("an explicit size wins").contains("maxBatchSize=3");
      assertThatThrownBy(() -> IdempotentConsumer.<String>named("c").slowMessageThreshold(Duration.ZERO))
          .hasMessage("slowMessageThreshold must be positive, was PT0S");
      System.setProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY, "zero");
      assertThatThrownBy(() -> IdempotentConsumer.<String>named("c"))
          .hasMessage("system property idem.maxBatchSize must be a whole number of at least 1, was 'zero'");
    } finally {
      if (before == null) {
        System.clearProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
      } else {
        System.setProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY, before);
      }
    }
  }
}
