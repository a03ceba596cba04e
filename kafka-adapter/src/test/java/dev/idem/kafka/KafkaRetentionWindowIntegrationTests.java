package dev.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.kafka.testing.KafkaService;
import dev.idem.postgres.PostgresInbox;
import dev.idem.retention.RedeliveryHorizon;
import dev.idem.retention.Retention;
import dev.idem.retention.RetentionWindowException;
import dev.idem.testing.PostgresService;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * The retention window is checked against the topics' retention.ms + segment.ms on the real
 * broker: Kafka deletes whole segments, so a record can outlive retention.ms by up to segment.ms.
 */
class KafkaRetentionWindowIntegrationTests {

  private static final String ONE_HOUR = "3600000";
  private static final String TEN_MINUTES = "600000";
  private static final String SEVEN_DAYS = "604800000";

  private final KafkaService kafka = KafkaService.get();
  private final PostgresInbox inbox = PostgresInbox.create(PostgresService.get().connectionFactory(), "window_check_not_created");

  private String topic(Map<String, String> configs) throws Exception {
    String topic = KafkaService.uniqueName("retention_window");
    kafka.admin().createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(configs))).all().get(60, TimeUnit.SECONDS);
    return topic;
  }

  @Test
  void windowShorterThanTheTopicsRetentionIsRefusedAtStartNamingBothNumbers() throws Exception {
    String topic = topic(Map.of("retention.ms", ONE_HOUR, "segment.ms", TEN_MINUTES));
    Retention retention = Retention.builder().inbox(inbox, Duration.ofMinutes(30))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic)).build();
    AtomicBoolean consumerStarted = new AtomicBoolean();

    assertThatThrownBy(
        () -> retention.alongside(Flux.never().doOnSubscribe(s -> consumerStarted.set(true))).blockFirst(Duration.ofSeconds(60)))
        .isInstanceOf(RetentionWindowException.class)
        .hasMessageContaining("Retention window PT30M of window_check_not_created")
        .hasMessageContaining("topic '" + topic + "' retention.ms=3600000 + segment.ms=600000")
        .hasMessageContaining("the window must be at least PT1H10M")
        .hasMessageContaining("allowWindowShorterThanBroker(true)");
    assertThat(consumerStarted).isFalse();
  }

  /** The reported case: 2 h passed against 1 h retention although 7 d segments keep records for up to 169 h. */
  @Test
  void windowLongerThanRetentionButShorterThanRetentionPlusSegmentIsRefusedNamingTopicBothSettingsAndTheRequiredWindow()
      throws Exception {
    String topic = topic(Map.of("retention.ms", ONE_HOUR, "segment.ms", SEVEN_DAYS));
    Retention retention = Retention.builder().inbox(inbox, Duration.ofHours(2))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic)).build();

    assertThatThrownBy(() -> retention.verifyWindow().block(Duration.ofSeconds(60)))
        .isInstanceOf(RetentionWindowException.class)
        .hasMessageContaining("Retention window PT2H of window_check_not_created is shorter than the broker can redeliver")
        .hasMessageContaining("topic '" + topic + "' retention.ms=3600000 + segment.ms=604800000")
        .hasMessageContaining("a record can outlive retention.ms by up to segment.ms")
        .hasMessageContaining("the window must be at least PT169H");
  }

  @Test
  void horizonIsRetentionPlusSegmentOfTheLongestKeepingTopic() throws Exception {
    String shortSegments = topic(Map.of("retention.ms", ONE_HOUR, "segment.ms", TEN_MINUTES));
    String longSegments = topic(Map.of("retention.ms", TEN_MINUTES, "segment.ms", SEVEN_DAYS));

    RedeliveryHorizon.Horizon horizon = KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), shortSegments, longSegments).horizon()
        .block(Duration.ofSeconds(60));

    assertThat(horizon.kind()).isEqualTo(RedeliveryHorizon.Kind.BOUNDED);
    assertThat(horizon.duration()).isEqualTo(Duration.ofMinutes(10).plusDays(7));
    assertThat(horizon.source()).startsWith("topic '" + longSegments + "' retention.ms=600000 + segment.ms=604800000");
  }

  @Test
  void windowOfAtLeastRetentionPlusSegmentOrTheExplicitOverrideStarts() throws Exception {
    String topic = topic(Map.of("retention.ms", ONE_HOUR, "segment.ms", TEN_MINUTES));
    KafkaRedeliveryHorizon horizon = KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic);

    Retention.builder().inbox(inbox, Duration.ofMinutes(70)).checkedAgainst(horizon).build().verifyWindow()
        .block(Duration.ofSeconds(60));
    Retention.builder().inbox(inbox, Duration.ofHours(2)).checkedAgainst(horizon).build().verifyWindow()
        .block(Duration.ofSeconds(60));
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

  @Test
  void compactAndDeleteTopicIsStillUnboundedBecauseCompactionMergesSegments() throws Exception {
    String topic = topic(Map.of("cleanup.policy", "compact,delete", "retention.ms", ONE_HOUR, "segment.ms", TEN_MINUTES));

    RedeliveryHorizon.Horizon horizon = KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic).horizon()
        .block(Duration.ofSeconds(60));

    assertThat(horizon.kind()).isEqualTo(RedeliveryHorizon.Kind.UNBOUNDED);
    assertThat(horizon.source()).contains("topic '" + topic + "'").contains("cleanup.policy=compact,delete");
  }

  @Test
  void infiniteRetentionIsUnboundedSoAnyWindowIsRefused() throws Exception {
    String topic = topic(Map.of("retention.ms", "-1"));
    Retention retention = Retention.builder().inbox(inbox, Duration.ofDays(365))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), topic)).build();

    assertThatThrownBy(() -> retention.verifyWindow().block(Duration.ofSeconds(60)))
        .isInstanceOf(RetentionWindowException.class)
        .hasMessageContaining("can redeliver at any time")
        .hasMessageContaining("topic '" + topic + "' keeps records without a time bound (retention.ms=-1");
  }

  @Test
  void missingTopicFailsNamingIt() throws Exception {
    String existing = topic(Map.of("retention.ms", ONE_HOUR));
    String missing = KafkaService.uniqueName("retention_window_missing");
    Retention retention = Retention.builder().inbox(inbox, Duration.ofDays(30))
        .checkedAgainst(KafkaRedeliveryHorizon.of(kafka.bootstrapServers(), existing, missing)).build();

    assertThatThrownBy(() -> retention.verifyWindow().block(Duration.ofSeconds(60)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("topic '" + missing + "' does not exist (UnknownTopicOrPartitionException)")
        .hasCauseInstanceOf(UnknownTopicOrPartitionException.class);
  }
}
