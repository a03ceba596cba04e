package dev.idem.examples.orders;

/**
 * An order, the JSON body of a message on either channel, for example
 * {@code {"orderId":"o-17","customerId":3,"amountCents":1250}}. Its order id is also the message's
 * id (Kafka's {@code message-id} header, RabbitMQ's {@code message-id} property), so a resent order
 * is a repeat.
 *
 * @param orderId the order's id
 * @param customerId the customer who placed it
 * @param amountCents the amount in cents
 */
public record Order(String orderId, long customerId, long amountCents) {}
