package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.outbox.OutboxMessage;
import dev.idem.outbox.OutboxPublisher;
import java.io.IOException;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.rabbitmq.CorrelableOutboundMessage;
import reactor.rabbitmq.RabbitFlux;
import reactor.rabbitmq.SendOptions;
import reactor.rabbitmq.Sender;
import reactor.rabbitmq.SenderOptions;

/**
 * An {@link OutboxPublisher} that sends outbox rows to RabbitMQ, for {@code dev.idem.outbox.OutboxRelay}.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder(outbox, RabbitOutboxPublisher.create("amqp://guest:guest@localhost:5672")).build();
 * }</pre>
 *
 * <p>Guarantees: each batch is published on one channel with publisher confirms and the
 * {@code mandatory} flag; a message counts as sent only when the broker confirmed it
 * ({@code basic.ack}). A message the broker returns (no queue bound for it) or nacks is a
 * failed attempt, which the relay retries and eventually parks. The row's destination is the
 * routing key on the configured exchange (default the default exchange {@code ""}, where the
 * routing key is a queue name); the row's stable id is the AMQP {@code message-id} property,
 * which {@link RabbitSource} reads by default, so an Idem consumer downstream deduplicates a row
 * the relay sends twice. Messages are persistent ({@code delivery-mode} 2), carry the row's
 * headers as AMQP headers and its creation time as the {@code timestamp} property.
 *
 * <p>The connection is opened on first use with the client's automatic recovery and reused;
 * {@link #close()} closes it. Thread-safe. {@link #toString()} masks the URI's password.
 */
public final class RabbitOutboxPublisher implements OutboxPublisher, AutoCloseable {

  /** Default exchange: the default exchange, where a routing key names a queue. */
  public static final String DEFAULT_EXCHANGE = "";
  /** Default client-provided connection name: {@value}. */
  public static final String DEFAULT_CONNECTION_NAME = "idem-outbox-relay";

  private final String uri;
  private final String exchange;
  private final Sender sender;

  private RabbitOutboxPublisher(Builder b) {
    this.uri = b.uri;
    this.exchange = b.exchange;
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(b.uri);
    } catch (Exception e) {
      throw new IllegalArgumentException("uri is not a valid AMQP URI: " + masked(b.uri), e);
    }
    factory.setAutomaticRecoveryEnabled(true);
    String connectionName = b.connectionName;
    this.sender = RabbitFlux.createSender(new SenderOptions()
        .connectionFactory(factory)
        .connectionSupplier(cf -> cf.newConnection(connectionName)));
  }

  /**
   * A publisher to the default exchange.
   *
   * @param uri an AMQP URI such as {@code amqp://user:password@host:5672/vhost}
   * @return the publisher; close it when the relay stops
   */
  public static RabbitOutboxPublisher create(String uri) {
    return builder(uri).build();
  }

  /**
   * Starts a builder.
   *
   * @param uri an AMQP URI, not blank
   * @return a builder
   */
  public static Builder builder(String uri) {
    return new Builder(uri);
  }

  @Override
  public Mono<Void> publish(OutboxMessage message) {
    return publishAll(List.of(message)).next()
        .flatMap(result -> result.isSent() ? Mono.<Void>empty() : Mono.<Void>error(result.error()));
  }

  @Override
  public Flux<Result> publishAll(List<OutboxMessage> messages) {
    return sender.sendWithTypedPublishConfirms(
            Flux.fromIterable(messages).map(m -> new CorrelableOutboundMessage<>(exchange, m.destination(), properties(m), m.payload(), m)),
            new SendOptions().trackReturned(true))
        .map(result -> {
          OutboxMessage message = result.getOutboundMessage().getCorrelationMetadata();
          if (result.isReturned()) {
            return Result.failed(message, new IOException("unroutable: the broker returned the message; no queue is bound to exchange '"
                + exchange + "' with routing key '" + message.destination() + "'"));
          }
          return result.isAck() ? Result.sent(message) : Result.failed(message, new IOException("the broker nacked the message"));
        })
        // Confirms arrive on the client's connection thread; the relay must not continue there.
        .publishOn(Schedulers.parallel());
  }

  static AMQP.BasicProperties properties(OutboxMessage message) {
    Map<String, Object> headers = new HashMap<>(message.headers());
    return new AMQP.BasicProperties.Builder()
        .messageId(message.id())
        .deliveryMode(2)
        .timestamp(Date.from(message.createdAt()))
        .headers(headers)
        .build();
  }

  @Override
  public void close() {
    sender.close();
  }

  @Override
  public String toString() {
    return "RabbitOutboxPublisher[uri=" + masked(uri) + ", exchange='" + exchange + "']";
  }

  private static String masked(String uri) {
    return uri == null ? null : uri.replaceFirst("^(amqps?://[^:@/]*):[^@/]*@", "$1:****@");
  }

  /** Configures a {@link RabbitOutboxPublisher}; setters check their argument and name it in the error. */
  public static final class Builder {
    private final String uri;
    private String exchange = DEFAULT_EXCHANGE;
    private String connectionName = DEFAULT_CONNECTION_NAME;

    private Builder(String uri) {
      if (uri == null || uri.isBlank()) {
        throw new IllegalArgumentException("uri must not be blank");
      }
      this.uri = uri;
    }

    /**
     * The exchange messages are published to; the row's destination is the routing key.
     * Default {@code ""} (the default exchange: the destination is a queue name).
     *
     * @param exchange the exchange name, not {@code null}
     * @return this builder
     */
    public Builder exchange(String exchange) {
      this.exchange = Objects.requireNonNull(exchange, "exchange");
      return this;
    }

    /**
     * The client-provided connection name shown by the broker. Default {@value RabbitOutboxPublisher#DEFAULT_CONNECTION_NAME}.
     *
     * @param connectionName not blank
     * @return this builder
     */
    public Builder connectionName(String connectionName) {
      if (connectionName == null || connectionName.isBlank()) {
        throw new IllegalArgumentException("connectionName must not be blank");
      }
      this.connectionName = connectionName;
      return this;
    }

    /**
     * Builds the publisher (it connects on first use).
     *
     * @return the publisher
     */
    public RabbitOutboxPublisher build() {
      return new RabbitOutboxPublisher(this);
    }
  }
}
