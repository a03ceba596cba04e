/**
 * The RabbitMQ adapter of Idem: {@link dev.idem.rabbit.RabbitSource} consumes a queue with manual
 * acks as deliveries for {@link dev.idem.IdempotentConsumer}, acknowledging a message only after
 * the pipeline settled it and dead-lettering per {@link dev.idem.rabbit.DeadLetterMode};
 * {@link dev.idem.rabbit.RabbitDeadLetterReplayer} puts dead letters back after a fix and
 * {@link dev.idem.rabbit.RabbitOutboxPublisher} sends outbox rows with publisher confirms. Built on
 * amqp-client 5.x alone.
 */
@NullMarked
package dev.idem.rabbit;

import org.jspecify.annotations.NullMarked;
