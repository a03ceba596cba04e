package dev.idem.examples.refunds;

import dev.idem.Delivery;
import dev.idem.outbox.OutboxPublisher;
import java.util.List;
import reactor.core.publisher.Flux;

/**
 * The broker side of the refund example: where refund events come from, where notifications go,
 * and where the downstream sender reads them. {@link RabbitRefundBroker} and
 * {@link KafkaRefundBroker} implement it with Idem's adapters.
 */
interface RefundBroker extends AutoCloseable {

  /** A refund event as the upstream service publishes it: its id and its amount in cents. */
  record RefundEvent(String refundId, long amountCents) {}

  /** Publishes refund events, each as often as it appears in the list, with its id as message id. */
  void publishRefunds(List<RefundEvent> events);

  /** The refund events, as deliveries for the refunds consumer. */
  Flux<Delivery<String>> refunds();

  /** Where the outbox relay sends notifications: a queue name (RabbitMQ) or a topic (Kafka). */
  String notificationsDestination();

  /** The outbox relay's publisher to this broker. */
  OutboxPublisher publisher();

  /** The notifications, as deliveries for the downstream sender. */
  Flux<Delivery<String>> notifications();

  @Override
  void close();
}
