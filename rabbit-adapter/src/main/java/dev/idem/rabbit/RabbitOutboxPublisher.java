package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.outbox.OutboxMessage;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.rabbit.internal.ConfirmingPublisher;
import dev.idem.rabbit.internal.ConnectionHolder;
import java.util.Date;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * An {@link OutboxPublisher} that sends outbox rows to RabbitMQ, for {@code dev.idem.outbox.OutboxRelay}.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder(outbox, RabbitOutboxPublisher.create("amqp://guest:guest@localhost:5672")).build();
 * }</pre>
 *
 * <p>Guarantees: messages are published on one channel in confirm mode, with the
 * {@code mandatory} flag, pipelined (a batch does not wait for each confirm in turn); a message
 * counts as sent only when the broker confirmed it ({@code basic.ack}). A message the broker
 * returns (no queue bound for it: the error says "unroutable"), nacks, or whose channel closes
 * before the confirm is a failed attempt, which the relay retries and eventually parks; the
 * relay's {@code publishTimeout} bounds the wait for a confirm. The row's destination is the
 * routing key on the configured exchange (default the default exchange {@code ""}, where the
 * routing key is a queue name); the row's stable id is the AMQP {@code message-id} property,
 * which {@link RabbitSource} reads by default, so an Idem consumer downstream deduplicates a row
 * the relay sends twice. Messages are persistent ({@code delivery-mode} 2), carry the row's
 * headers as AMQP headers (plus {@link RabbitHeaders#PUBLISH_SEQUENCE}) and its creation time as the
 * {@code timestamp} property.
 *
 * <p>Built on amqp-client alone (see {@code ConfirmingPublisher}), so it works with every
 * amqp-client 5.x that the build tests (5.25 to 5.37). The connection is opened on first use and reused; after it is lost,
 * the next publish opens a new one (the client's automatic recovery is off, so no confirm is ever
 * awaited on a recovered channel whose sequence numbers restarted). {@link #close()} closes it.
 * Thread-safe. {@link #toString()} masks the URI's password.
 */
public final class RabbitOutboxPublisher implements OutboxPublisher, AutoCloseable {

  /** Default exchange: the default exchange, where a routing key names a queue. */
  public static final String DEFAULT_EXCHANGE = "";
  /** Default client-provided connection name: {@value}. */
  public static final String DEFAULT_CONNECTION_NAME = "idem-outbox-relay";

  private final String uri;
  private final String exchange;
  private final ConnectionHolder connection;
  private final ConfirmingPublisher publisher;

  private RabbitOutboxPublisher(Builder b) {
    this.uri = b.uri;
    this.exchange = b.exchange;
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(b.uri);
    } catch (Exception e) {
      throw new IllegalArgumentException("uri is not a valid AMQP URI: " + masked(b.uri), e);
    }
    factory.setAutomaticRecoveryEnabled(false);
    factory.setTopologyRecoveryEnabled(false);
    this.connection = new ConnectionHolder(factory, b.connectionName);
    this.publisher = new ConfirmingPublisher(b.connectionName, () -> connection.get().createChannel());
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

  /**
   * {@inheritDoc}
   *
   * <p>The relay's default {@link #publishAll} calls this for a whole batch at once; the publishes
   * are pipelined on the one channel.
   */
  @Override
  public Mono<Void> publish(OutboxMessage message) {
    return Mono.defer(() -> publisher.publish(exchange, message.destination(), properties(message), message.payload()));
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
    publisher.close();
    connection.close();
  }

  @Override
  public String toString() {
    return "RabbitOutboxPublisher[uri=" + masked(uri) + ", exchange='" + exchange + "']";
  }

  private static @Nullable String masked(@Nullable String uri) {
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
