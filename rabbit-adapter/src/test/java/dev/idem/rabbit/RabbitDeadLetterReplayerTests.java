package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.impl.LongStringHelper;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RabbitDeadLetterReplayerTests {

  @Test
  void originComesFromIdemHeaders() {
    Map<String, Object> headers = new HashMap<>();
    headers.put(RabbitHeaders.ORIGINAL_EXCHANGE, LongStringHelper.asLongString(""));
    headers.put(RabbitHeaders.ORIGINAL_ROUTING_KEY, LongStringHelper.asLongString("payments"));
    headers.put(RabbitHeaders.REASON, LongStringHelper.asLongString("RETRIES_EXHAUSTED"));
    DeadLetteredMessage m = RabbitDeadLetterReplayer.describe(response(headers));
    assertThat(m.targetExchange()).isEmpty();
    assertThat(m.targetRoutingKey()).isEqualTo("payments");
    assertThat(m.reason()).isEqualTo("RETRIES_EXHAUSTED");
    assertThat(m.messageId()).isEqualTo("id-1");
    assertThat(m.hasTarget()).isTrue();
  }

  @Test
  void originFallsBackToTheOldestXDeathEntry() {
    Map<String, Object> recent = Map.of("exchange", LongStringHelper.asLongString("q.dlx"), "routing-keys",
        List.of(LongStringHelper.asLongString("q")));
    Map<String, Object> oldest = Map.of("exchange", LongStringHelper.asLongString("orders"), "routing-keys",
        List.of(LongStringHelper.asLongString("orders.created")));
    DeadLetteredMessage m = RabbitDeadLetterReplayer.describe(response(Map.of("x-death", List.of(recent, oldest))));
    assertThat(m.targetExchange()).isEqualTo("orders");
    assertThat(m.targetRoutingKey()).isEqualTo("orders.created");
    assertThat(m.reason()).isNull();
  }

  @Test
  void unknownOriginHasNoTarget() {
    assertThat(RabbitDeadLetterReplayer.describe(response(Map.of())).hasTarget()).isFalse();
  }

  @Test
  void replayedCopyKeepsIdDropsReasonAndCountsReplays() {
    Map<String, Object> headers = new HashMap<>();
    headers.put(RabbitHeaders.REASON, "MISSING_PAYLOAD");
    headers.put(RabbitHeaders.ERROR_CLASS, "x");
    headers.put("x-death", List.of());
    headers.put(RabbitHeaders.REPLAY_COUNT, 2);
    headers.put("tenant", "t-1");
    AMQP.BasicProperties replayed = RabbitDeadLetterReplayer.replayProperties(
        new AMQP.BasicProperties.Builder().messageId("id-1").contentType("text/plain").headers(headers).build());
    assertThat(replayed.getMessageId()).isEqualTo("id-1");
    assertThat(replayed.getContentType()).isEqualTo("text/plain");
    assertThat(replayed.getHeaders()).doesNotContainKeys(RabbitHeaders.REASON, RabbitHeaders.ERROR_CLASS, "x-death")
        .containsEntry(RabbitHeaders.REPLAY_COUNT, 3).containsEntry("tenant", "t-1");
  }

  private static GetResponse response(Map<String, Object> headers) {
    AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId("id-1").headers(headers).build();
    return new GetResponse(new Envelope(7, false, "q.dlx", "q"), props, new byte[0], 0);
  }
}
