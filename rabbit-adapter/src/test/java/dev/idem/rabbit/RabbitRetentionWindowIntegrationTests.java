package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.retention.Retention;
import dev.idem.retention.RetentionWindowException;
import dev.idem.testing.PostgresService;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The retention window is checked against the queue's message TTL. */
class RabbitRetentionWindowIntegrationTests {

  private final RabbitService rabbit = RabbitService.get();
  private final PostgresInbox inbox = PostgresInbox.create(PostgresService.get().connectionFactory(), "window_check_not_created");

  @Test
  void windowShorterThanTheQueuesMessageTtlIsRefusedNamingBothNumbersAndLongerIsAccepted() throws Exception {
    String queue = PostgresService.uniqueName("ttl_queue");
    Map<String, Object> arguments = Map.of(RabbitRedeliveryHorizon.MESSAGE_TTL_ARGUMENT, 60_000);
    try (Channel channel = rabbit.admin().createChannel()) {
      // The broker accepts the declaration: these are the queue's real arguments.
      channel.queueDeclare(queue, true, false, false, arguments);
      RabbitRedeliveryHorizon horizon = RabbitRedeliveryHorizon.fromQueueArguments(queue, arguments);

      assertThatThrownBy(() -> Retention.builder().inbox(inbox, Duration.ofSeconds(30)).checkedAgainst(horizon).build()
          .verifyWindow().block(Duration.ofSeconds(30)))
          .isInstanceOf(RetentionWindowException.class)
          .hasMessageContaining("PT30S")
          .hasMessageContaining("queue '" + queue + "' x-message-ttl=60000");
      Retention.builder().inbox(inbox, Duration.ofMinutes(2)).checkedAgainst(horizon).build().verifyWindow()
          .block(Duration.ofSeconds(30));
      assertThat(horizon.horizon().block().duration()).isEqualTo(Duration.ofMinutes(1));
    } finally {
      try (Channel channel = rabbit.admin().createChannel()) {
        channel.queueDelete(queue);
      }
    }
  }

  @Test
  void queueWithoutTtlHasAnUnknownHorizonAndRetentionStarts() {
    RabbitRedeliveryHorizon horizon = RabbitRedeliveryHorizon.fromQueueArguments("refunds", Map.of());
    Retention.builder().inbox(inbox, Duration.ofSeconds(30)).checkedAgainst(horizon).build().verifyWindow()
        .block(Duration.ofSeconds(30));
    assertThat(horizon.horizon().block().kind()).isEqualTo(dev.idem.retention.RedeliveryHorizon.Kind.UNKNOWN);
  }
}
