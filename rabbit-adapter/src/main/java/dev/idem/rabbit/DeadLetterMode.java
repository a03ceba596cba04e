package dev.idem.rabbit;

/**
 * How a {@link RabbitSource} dead-letters a message the pipeline gave up on.
 */
public enum DeadLetterMode {
  /**
   * The default. Publish a copy to the configured dead-letter exchange with publisher confirms
   * and the {@code mandatory} flag, wait for the broker's confirm, then {@code basic.ack} the
   * original. The copy keeps the body, the properties and the message id, and carries the
   * reason headers of {@link RabbitHeaders} (reason, detail, error class and message, consumer,
   * attempts, original exchange, routing key and queue).
   *
   * <p>Why the default: it is the only mode that records <em>why</em> a message failed, and the
   * confirm makes the dead letter durable before the original is acknowledged. An unroutable
   * dead letter (no queue bound) is returned by the broker and treated as a failed publish: it is
   * retried while the delivery's channel is open, never acknowledged as if it had succeeded.
   *
   * <p>Cost: one confirmed publish per dead letter. Dead letters are at least once: a crash
   * between the confirm and the ack, or the loss of the delivery's channel there, leaves the
   * original unacknowledged. On a lost channel the settlement fails with an error saying that the
   * broker will redeliver the message; the broker does, and the redelivery is dead-lettered again.
   * So each redelivery adds at most one copy to the dead-letter queue, never more: a settlement
   * that is run again publishes nothing once its dead letter was confirmed, nor when its channel
   * is already gone. The {@link RabbitDeadLetterReplayer replayed} copies are deduplicated by the
   * inbox; count dead letters by message id.
   */
  PUBLISH_WITH_CONFIRMS,
  /**
   * {@code basic.reject} without requeue, so the broker moves the message to the queue's own
   * {@code x-dead-letter-exchange} (see {@link RabbitTopology}). Cheap, but the broker adds only
   * its {@code x-death} header: the reason, error and consumer are lost (they are logged).
   * Without a dead-letter exchange on the queue the broker <em>discards</em> the message, and on
   * classic queues broker dead-lettering is at-most-once; use it only with a declared DLX, ideally
   * on a quorum queue with {@code x-dead-letter-strategy=at-least-once}.
   */
  REJECT_TO_QUEUE_DLX
}
