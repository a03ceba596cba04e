package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import java.time.Instant;
import java.util.Map;
import reactor.core.publisher.Mono;

/**
 * One RabbitMQ delivery as a {@link dev.idem.Delivery}. Settlement is idempotent (see
 * {@link AbstractDelivery}) and always goes to the channel that delivered the message.
 *
 * @param <T> the payload type
 */
public final class RabbitDelivery<T> extends AbstractDelivery<T> {

  private final ConsumerSession session;
  private final Settler settler;
  private final String queue;
  private final Envelope envelope;
  private final AMQP.BasicProperties properties;
  private final byte[] body;
  private final String id;
  private final T payload;
  private final Throwable decodingFailure;
  private final String orderingKey;
  private final int attempt;
  private final Map<String, String> headers;

  RabbitDelivery(ConsumerSession session, Settler settler, String queue, Envelope envelope, AMQP.BasicProperties properties,
      byte[] body, String id, T payload, Throwable decodingFailure, String orderingKey) {
    this.session = session;
    this.settler = settler;
    this.queue = queue;
    this.envelope = envelope;
    this.properties = properties;
    this.body = body;
    this.id = id;
    this.payload = payload;
    this.decodingFailure = decodingFailure;
    this.orderingKey = orderingKey;
    this.attempt = DeliveryAttempts.of(envelope.isRedeliver(), properties.getHeaders());
    this.headers = HeaderValues.renderAll(envelope, properties);
  }

  @Override
  public String id() {
    return id;
  }

  @Override
  public T payload() {
    return payload;
  }

  @Override
  public Throwable decodingFailure() {
    return decodingFailure;
  }

  @Override
  public Map<String, String> headers() {
    return headers;
  }

  @Override
  public String orderingKey() {
    return orderingKey;
  }

  /** RabbitMQ has no partitions; the queue is the unit of order, so it stands in for one. */
  @Override
  public String partition() {
    return queue;
  }

  @Override
  public Instant timestamp() {
    return properties.getTimestamp() == null ? null : properties.getTimestamp().toInstant();
  }

  @Override
  public int deliveryAttempt() {
    return attempt;
  }

  @Override
  protected Mono<Void> doAck() {
    return settler.ack(this);
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return settler.deadLetter(this, deadLetter);
  }

  ConsumerSession session() {
    return session;
  }

  /**
   * The envelope (delivery tag, exchange, routing key).
   *
   * @return the envelope
   */
  public Envelope envelope() {
    return envelope;
  }

  /**
   * The AMQP properties.
   *
   * @return the properties
   */
  public AMQP.BasicProperties properties() {
    return properties;
  }

  byte[] body() {
    return body;
  }

  String queue() {
    return queue;
  }

  @Override
  public String toString() {
    return "RabbitDelivery[queue=" + queue + ", id=" + id + ", tag=" + envelope.getDeliveryTag() + ", attempt=" + attempt + "]";
  }
}
