package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.kafka.testing.KafkaService;
import dev.idem.postgres.PostgresInbox;
import dev.idem.retention.Retention;
import dev.idem.retention.RetentionWindowException;
import dev.idem.testing.PostgresService;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/** The retention window is checked against the topics' retention.ms on the real broker. */
class KafkaRetentionWindowIntegrationTests {

  private final KafkaService kafka = KafkaService.get();
  private final PostgresInbox inbox = PostgresInbox.create(PostgresService.get().connectionFactory(), "window_check_not_created");

  private String topic(Map<String, String> configs) throws Exception {
    String topic = KafkaService.uniqueName("retention_window");
    kafka.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(configs))).all().get(60, TimeUnit.SECONDS);
    return topic;
  }

  @Test
  void windowShorterThanTheTopicsRetentionIsRefusedAtStartNamingBothNumbers() throws Exception {
    String topic = topic(Map.of("retention.ms", "3600000"));
    Retention retention = Retention.builder().inbox(inbox, Duration.ofMinutes(30))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic)).build();
    AtomicBoolean consumerStarted = new AtomicBoolean();

    assertThatThrownBy(() -> retention.alongside(Flux.never().doOnSubscribe(s -> consumerStarted.set(true))).blockFirst(Duration.ofSeconds(60)))
        .isInstanceOf(RetentionWindowException.class)
        .hasMessageContaining("Retention window PT30M of window_check_not_created")
        .hasMessageContaining("topic '" + topic + "' retention.ms=3600000")
        .hasMessageContaining("PT1H")
        .hasMessageContaining("allowWindowShorterThanBroker(true)");
    assertThat(consumerStarted).isFalse();
  }

  @Test
  void windowLongerThanTheTopicsRetentionOrTheExplicitOverrideStarts() throws Exception {
    String topic = topic(Map.of("retention.ms", "3600000"));
    KafkaRedeliveryHorizon horizon = KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic);

    Retention.builder().inbox(inbox, Duration.ofHours(2)).checkedAgainst(horizon).build().verifyWindow().block(Duration.ofSeconds(60));
    Retention.builder().inbox(inbox, Duration.ofMinutes(30)).checkedAgainst(horizon).allowWindowShorterThanBroker(true).build()
        .verifyWindow().block(Duration.ofSeconds(60));
  }

  @Test
  void compactedTopicKeepsRecordsWithoutBoundSoAnyWindowIsRefused() throws Exception {
    String topic = topic(Map.of("cleanup.policy", "compact"));
    Retention retention = Retention.builder().inbox(inbox, Duration.ofDays(365))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic)).build();

    assertThatThrownBy(() -> retention.verifyWindow().block(Duration.ofSeconds(60)))
        .isInstanceOf(RetentionWindowException.class)
        .hasMessageContaining("can redeliver at any time")
        .hasMessageContaining("cleanup.policy=compact");
  }
}
