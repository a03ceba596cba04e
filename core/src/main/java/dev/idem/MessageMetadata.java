package dev.idem;

import java.time.Instant;
import java.util.Map;
import java.util.Optional;

/**
 * What the broker said about the message being processed, as the handler sees it through
 * {@link Tx#metadata()} (or {@link BatchItem#metadata()} in a batch handler): its id, headers,
 * key, partition, timestamp, delivery attempt and broker coordinates.
 *
 * <p>Values are read from the {@link Delivery} when asked for; every accessor is cheap, never
 * {@code null}, and never throws for a message that reached the handler (its id was valid). Maps
 * are immutable.
 *
 * <p>Broker coordinates ({@link #broker()}) use the keys below, so that a handler can record
 * where a message came from without importing an adapter:
 * <ul>
 *   <li>Kafka: {@value #KAFKA_TOPIC}, {@value #KAFKA_PARTITION}, {@value #KAFKA_OFFSET};</li>
 *   <li>RabbitMQ: {@value #RABBITMQ_EXCHANGE}, {@value #RABBITMQ_ROUTING_KEY},
 *       {@value #RABBITMQ_QUEUE}, {@value #RABBITMQ_REDELIVERED}, {@value #RABBITMQ_DELIVERY_TAG}.</li>
 * </ul>
 */
public interface MessageMetadata {

  /** Broker coordinate: the Kafka topic: {@value}. */
  String KAFKA_TOPIC = "kafka.topic";
  /** Broker coordinate: the Kafka partition number, in decimal: {@value}. */
  String KAFKA_PARTITION = "kafka.partition";
  /** Broker coordinate: the record's Kafka offset, in decimal: {@value}. */
  String KAFKA_OFFSET = "kafka.offset";
  /** Broker coordinate: the RabbitMQ exchange the message was published to (empty for the default exchange): {@value}. */
  String RABBITMQ_EXCHANGE = "rabbitmq.exchange";
  /** Broker coordinate: the RabbitMQ routing key it was published with: {@value}. */
  String RABBITMQ_ROUTING_KEY = "rabbitmq.routing-key";
  /** Broker coordinate: the RabbitMQ queue it was consumed from: {@value}. */
  String RABBITMQ_QUEUE = "rabbitmq.queue";
  /** Broker coordinate: the RabbitMQ {@code redelivered} flag, {@code true} or {@code false}: {@value}. */
  String RABBITMQ_REDELIVERED = "rabbitmq.redelivered";
  /** Broker coordinate: the RabbitMQ delivery tag on its channel, in decimal: {@value}. */
  String RABBITMQ_DELIVERY_TAG = "rabbitmq.delivery-tag";

  /**
   * The message id, the dedup key.
   *
   * @return the id
   */
  String messageId();

  /**
   * Broker headers and properties rendered as strings ({@link Delivery#headers()}).
   *
   * @return an immutable map, empty when there are none
   */
  Map<String, String> headers();

  /**
   * One header.
   *
   * @param name the header name, case-sensitive
   * @return its value, empty when absent or {@code null}
   */
  default Optional<String> header(String name) {
    return Optional.ofNullable(headers().get(name));
  }

  /**
   * The message key ({@link Delivery#key()}): the Kafka record key as UTF-8, on RabbitMQ the
   * ordering key the source derived.
   *
   * @return the key, empty when the message has none
   */
  Optional<String> key();

  /**
   * The partition ({@link Delivery#partition()}): Kafka {@code topic-partition}, on RabbitMQ the
   * queue.
   *
   * @return the partition, empty when the broker has none
   */
  Optional<String> partition();

  /**
   * When the broker or producer stamped the message.
   *
   * @return the timestamp, empty when unknown
   */
  Optional<Instant> timestamp();

  /**
   * How often the broker has delivered this message, counting this delivery; 1 when the broker
   * cannot tell (Kafka).
   *
   * @return the delivery attempt, at least 1
   */
  int deliveryAttempt();

  /**
   * Where the message sits in the broker ({@link Delivery#brokerCoordinates()}), with the keys
   * named by this interface's constants.
   *
   * @return an immutable map, empty for sources that give none
   */
  Map<String, String> broker();

  /**
   * The metadata of a delivery, read from it when asked for.
   *
   * @param delivery the delivery
   * @return its metadata
   */
  static MessageMetadata of(Delivery<?> delivery) {
    return new DeliveryMetadata(java.util.Objects.requireNonNull(delivery, "delivery"));
  }
}
