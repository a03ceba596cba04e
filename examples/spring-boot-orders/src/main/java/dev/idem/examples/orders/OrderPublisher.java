package dev.idem.examples.orders;

import java.nio.charset.StandardCharsets;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageDeliveryMode;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.amqp.rabbit.connection.CorrelationData;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.stereotype.Component;
import tools.jackson.databind.json.JsonMapper;

/**
 * Produces orders, as the web shop (Kafka, with Spring Kafka's {@code KafkaTemplate}) and the
 * stores (RabbitMQ, with Spring AMQP's {@code RabbitTemplate}) do. The order id travels as the
 * message id, which is what the consumers deduplicate on; the Kafka key is the customer, so one
 * customer's orders keep their order. Each send completes when the broker has the message: Kafka's
 * acknowledgement ({@code acks=all}), RabbitMQ's publisher confirm
 * ({@code spring.rabbitmq.publisher-confirm-type: correlated}), failing when the broker refuses or
 * cannot route it.
 */
@Component
public class OrderPublisher {

  /** The Kafka header carrying the message id, the Idem Kafka source's default. */
  public static final String MESSAGE_ID_HEADER = "message-id";

  private final KafkaTemplate<String, String> kafka;
  private final RabbitTemplate rabbit;
  private final JsonMapper json;
  private final String topic;
  private final String queue;

  /**
   * Creates the publisher.
   *
   * @param kafka Spring Boot's {@code KafkaTemplate}
   * @param rabbit Spring Boot's {@code RabbitTemplate}
   * @param json Spring Boot's {@code JsonMapper}
   * @param topic {@code orders.kafka.topic}
   * @param queue {@code orders.rabbit.queue}
   */
  public OrderPublisher(KafkaTemplate<String, String> kafka, RabbitTemplate rabbit, JsonMapper json,
      @Value("${orders.kafka.topic}") String topic, @Value("${orders.rabbit.queue}") String queue) {
    this.kafka = kafka;
    this.rabbit = rabbit;
    this.json = json;
    this.topic = topic;
    this.queue = queue;
  }

  /**
   * Publishes an order on Kafka.
   *
   * @param order the order
   * @return completes when the broker has it
   */
  public CompletableFuture<Void> toKafka(Order order) {
    return toKafka(order.orderId(), Long.toString(order.customerId()), json.writeValueAsString(order));
  }

  /**
   * Publishes a message on Kafka as it is.
   *
   * @param messageId the message id
   * @param key the record key
   * @param body the body
   * @return completes when the broker has it
   */
  public CompletableFuture<Void> toKafka(String messageId, String key, String body) {
    ProducerRecord<String, String> record = new ProducerRecord<>(topic, key, body);
    record.headers().add(MESSAGE_ID_HEADER, messageId.getBytes(StandardCharsets.UTF_8));
    return kafka.send(record).thenApply(result -> null);
  }

  /**
   * Publishes an order on RabbitMQ.
   *
   * @param order the order
   * @return completes when the broker confirms it
   */
  public CompletableFuture<Void> toRabbit(Order order) {
    return toRabbit(order.orderId(), json.writeValueAsString(order));
  }

  /**
   * Publishes a message on RabbitMQ as it is, persistent, to the orders queue.
   *
   * @param messageId the message id
   * @param body the body
   * @return completes when the broker confirms it
   */
  public CompletableFuture<Void> toRabbit(String messageId, String body) {
    MessageProperties properties = new MessageProperties();
    properties.setMessageId(messageId);
    properties.setContentType(MessageProperties.CONTENT_TYPE_JSON);
    properties.setDeliveryMode(MessageDeliveryMode.PERSISTENT);
    CorrelationData correlation = new CorrelationData(UUID.randomUUID().toString());
    rabbit.send("", queue, new Message(body.getBytes(StandardCharsets.UTF_8), properties), correlation);
    return correlation.getFuture().thenApply(confirm -> {
      if (!confirm.ack()) {
        throw new IllegalStateException("RabbitMQ refused message " + messageId + ": " + confirm.reason());
      }
      if (correlation.getReturned() != null) {
        throw new IllegalStateException("RabbitMQ could not route message " + messageId + " to queue " + queue + ": "
            + correlation.getReturned().getReplyText());
      }
      return null;
    });
  }
}
