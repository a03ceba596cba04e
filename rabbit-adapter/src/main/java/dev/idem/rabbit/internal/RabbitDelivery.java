package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Envelope;
import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import dev.idem.MessageMetadata;
import dev.idem.internal.LogText;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * One RabbitMQ delivery as a {@link dev.idem.Delivery}. Settlement is idempotent (see
 * {@link AbstractDelivery}) and always goes to the channel that delivered the message.
 *
 * <p>A delivery whose id could not be read (the {@link dev.idem.rabbit.MessageIdExtractor} threw,
 * or rejected the value) throws an {@link IllegalArgumentException} from {@link #id()}, which the
 * pipeline dead-letters as {@link dev.idem.DeadLetterReason#INVALID_ID}; the adapter itself reads
 * the id only through {@link #idForLogs()}.
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
  private final @Nullable String id;
  private final @Nullable IllegalArgumentException idFailure;
  private final @Nullable T payload;
  private final @Nullable Throwable decodingFailure;
  private final @Nullable String orderingKey;
  private final int attempt;
  /** The headers rendered as text, on first use: most handlers never read them. */
  private volatile @Nullable Map<String, String> headers;
  /** Set once this delivery stopped counting as unsettled on its channel. */
  private final AtomicBoolean released = new AtomicBoolean();
  /** Set once a dead letter of this delivery was confirmed by the broker. */
  private final AtomicBoolean deadLetterConfirmed = new AtomicBoolean();

  RabbitDelivery(ConsumerSession session, Settler settler, String queue, Envelope envelope, AMQP.BasicProperties properties,
      byte[] body, @Nullable String id, @Nullable IllegalArgumentException idFailure, @Nullable T payload,
      @Nullable Throwable decodingFailure, @Nullable String orderingKey) {
    this.session = session;
    this.settler = settler;
    this.queue = queue;
    this.envelope = envelope;
    this.properties = properties;
    this.body = body;
    this.id = id;
    this.idFailure = idFailure;
    this.payload = payload;
    this.decodingFailure = decodingFailure;
    this.orderingKey = orderingKey;
    this.attempt = DeliveryAttempts.of(envelope.isRedeliver(), properties.getHeaders());
  }

  /**
   * The id.
   *
   * @return the id, or {@code null} when the message has none
   * @throws IllegalArgumentException when the id could not be read, saying why
   */
  @Override
  public @Nullable String id() {
    if (idFailure != null) {
      throw idFailure;
    }
    return id;
  }

  /**
   * The id for log lines and error messages; never throws.
   *
   * @return the id cut to {@value LogText#MAX_ID} characters, or a placeholder when there is none
   */
  public String idForLogs() {
    return idFailure != null ? "<invalid id>" : LogText.id(id);
  }

  @Override
  public @Nullable T payload() {
    return payload;
  }

  @Override
  public @Nullable Throwable decodingFailure() {
    return decodingFailure;
  }

  @Override
  public Map<String, String> headers() {
    Map<String, String> rendered = headers;
    if (rendered == null) {
      // Two threads may both render: the maps are equal and immutable, so either may stay.
      rendered = HeaderValues.renderAll(envelope, properties);
      headers = rendered;
    }
    return rendered;
  }

  @Override
  public @Nullable String orderingKey() {
    return orderingKey;
  }

  /** RabbitMQ has no partitions; the queue is the unit of order, so it stands in for one. */
  @Override
  public String partition() {
    return queue;
  }

  @Override
  public @Nullable Instant timestamp() {
    return properties.getTimestamp() == null ? null : properties.getTimestamp().toInstant();
  }

  /**
   * {@value dev.idem.MessageMetadata#RABBITMQ_EXCHANGE}, {@value dev.idem.MessageMetadata#RABBITMQ_ROUTING_KEY},
   * {@value dev.idem.MessageMetadata#RABBITMQ_QUEUE}, {@value dev.idem.MessageMetadata#RABBITMQ_REDELIVERED}
   * and {@value dev.idem.MessageMetadata#RABBITMQ_DELIVERY_TAG} of the delivery.
   */
  @Override
  public Map<String, String> brokerCoordinates() {
    return Map.of(MessageMetadata.RABBITMQ_EXCHANGE, String.valueOf(envelope.getExchange()),
        MessageMetadata.RABBITMQ_ROUTING_KEY, String.valueOf(envelope.getRoutingKey()),
        MessageMetadata.RABBITMQ_QUEUE, queue,
        MessageMetadata.RABBITMQ_REDELIVERED, Boolean.toString(envelope.isRedeliver()),
        MessageMetadata.RABBITMQ_DELIVERY_TAG, Long.toString(envelope.getDeliveryTag()));
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
   * Stops counting this delivery as unsettled on its channel: once, however often its settlement
   * is attempted.
   *
   * @return whether this call released it
   */
  boolean release() {
    if (released.compareAndSet(false, true)) {
      session.released();
      return true;
    }
    return false;
  }

  /** Counts this delivery as unsettled again, after a {@link #release()} whose ack never left. */
  void restore() {
    if (released.compareAndSet(true, false)) {
      session.delivered();
    }
  }

  boolean deadLetterConfirmed() {
    return deadLetterConfirmed.get();
  }

  void markDeadLetterConfirmed() {
    deadLetterConfirmed.set(true);
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
    return "RabbitDelivery[queue=" + queue + ", id=" + idForLogs() + ", tag=" + envelope.getDeliveryTag() + ", attempt=" + attempt
        + "]";
  }
}
