package dev.idem.rabbit;

import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A message in a dead-letter queue as {@link RabbitDeadLetterReplayer} shows it to a filter.
 *
 * @param messageId the AMQP {@code message-id} property, or {@code null}
 * @param reason the {@link RabbitHeaders#REASON} header (a {@link dev.idem.DeadLetterReason}
 *     name), or {@code null} for a message the broker dead-lettered itself
 * @param consumer the {@link RabbitHeaders#CONSUMER} header, or {@code null}
 * @param targetExchange where a replay sends it: the original exchange, or {@code null} when unknown
 * @param targetRoutingKey the original routing key, or {@code null} when unknown
 * @param headers all headers rendered as strings
 * @param body the body (not copied; do not modify)
 */
public record DeadLetteredMessage(
    @Nullable String messageId,
    @Nullable String reason,
    @Nullable String consumer,
    @Nullable String targetExchange,
    @Nullable String targetRoutingKey,
    Map<String, String> headers,
    byte[] body) {

  /**
   * Whether a replay knows where to send the message.
   *
   * @return {@code true} when the original exchange and routing key are known
   */
  public boolean hasTarget() {
    return targetExchange != null && targetRoutingKey != null;
  }
}
