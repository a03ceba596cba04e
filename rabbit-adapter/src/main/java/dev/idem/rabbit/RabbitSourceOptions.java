package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.Envelope;
import dev.idem.IdempotentConsumer;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Immutable settings of a {@link RabbitSource}, built with {@link #builder(String)}. Setters check
 * their argument and name it in the error; {@link Builder#build()} checks the combination.
 * {@link #toString()} and every error message mask the password of the URI (see
 * {@link #maskPassword(String)}).
 *
 * <p>Prefetch and the pipeline: {@code prefetch} is the broker's {@code basic.qos}, the most
 * unacknowledged messages the broker hands this consumer. Keep it at least the
 * {@link dev.idem.IdempotentConsumer} concurrency, or the pipeline can never fill its slots, and
 * best twice the pipeline's prefetch (as the default is): a message stays unacknowledged a little
 * after the pipeline let go of it, while its ack waits to be coalesced. Every message above the
 * concurrency waits in memory, so memory is bounded by {@code prefetch}.
 */
public final class RabbitSourceOptions {

  /** Default broker URI: {@value}. */
  public static final String DEFAULT_URI = "amqp://guest:guest@localhost:5672";
  /**
   * Default {@code basic.qos} prefetch: {@value}, twice the core's default prefetch. A delivery
   * counts against {@code basic.qos} from the moment the broker sends it until its ack frame
   * reaches the broker, longer than the pipeline holds it (acks wait briefly to be coalesced into
   * one {@code multiple} ack, see {@link RabbitSource#ackFrames()}), so with a window of twice the
   * pipeline's prefetch the pipeline always has its full prefetch to form batches from.
   */
  public static final int DEFAULT_PREFETCH = 2 * IdempotentConsumer.DEFAULT_PREFETCH;
  /** Largest prefetch RabbitMQ accepts: {@value}. */
  public static final int MAX_PREFETCH = 65_535;
  /** Default dead-letter mode: {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS}. */
  public static final DeadLetterMode DEFAULT_DEAD_LETTER_MODE = DeadLetterMode.PUBLISH_WITH_CONFIRMS;
  /** Suffix of the default dead-letter exchange name, appended to the queue name: {@value}. */
  public static final String DEFAULT_DEAD_LETTER_EXCHANGE_SUFFIX = ".dlx";
  /** Default first wait before resubscribing after a lost connection or channel: 200 ms. */
  public static final Duration DEFAULT_RECOVERY_BACKOFF = Duration.ofMillis(200);
  /** Default longest wait between resubscription attempts: 10 s. */
  public static final Duration DEFAULT_MAX_RECOVERY_BACKOFF = Duration.ofSeconds(10);
  /** Default time to wait for a dead-letter publish confirm: 30 s. */
  public static final Duration DEFAULT_CONFIRM_TIMEOUT = Duration.ofSeconds(30);

  /** Query parameters whose values are masked by {@link #maskPassword(String)}. */
  private static final Pattern SECRET_PARAMETER = Pattern.compile("(?i)([?&;](?:password|passwd|pass|pwd|secret|token)=)[^&#;]*");

  private final String uri;
  private final String queue;
  private final String connectionName;
  private final int prefetch;
  private final MessageIdExtractor messageId;
  private final BiFunction<Envelope, AMQP.BasicProperties, @Nullable String> orderingKey;
  private final DeadLetterMode deadLetterMode;
  private final String deadLetterExchange;
  private final String deadLetterRoutingKey;
  private final Duration recoveryBackoff;
  private final Duration maxRecoveryBackoff;
  private final Duration confirmTimeout;
  private final Consumer<ConnectionFactory> connectionFactoryCustomizer;

  private RabbitSourceOptions(Builder b) {
    this.uri = b.uri;
    this.queue = b.queue;
    this.connectionName = b.connectionName != null ? b.connectionName : "idem-" + b.queue;
    this.prefetch = b.prefetch;
    this.messageId = b.messageId;
    this.orderingKey = b.orderingKey;
    this.deadLetterMode = b.deadLetterMode;
    this.deadLetterExchange = b.deadLetterExchange != null ? b.deadLetterExchange : b.queue + DEFAULT_DEAD_LETTER_EXCHANGE_SUFFIX;
    this.deadLetterRoutingKey = b.deadLetterRoutingKey != null ? b.deadLetterRoutingKey : b.queue;
    this.recoveryBackoff = b.recoveryBackoff;
    this.maxRecoveryBackoff = b.maxRecoveryBackoff;
    this.confirmTimeout = b.confirmTimeout;
    this.connectionFactoryCustomizer = b.connectionFactoryCustomizer;
  }

  /**
   * Starts a builder for a queue.
   *
   * @param queue the queue to consume; not blank, at most 255 characters
   * @return a builder with every other setting at its default
   */
  public static Builder builder(String queue) {
    return new Builder(queue);
  }

  /**
   * The broker URI, e.g. {@code amqp://user:secret@host:5672/vhost}.
   *
   * @return the URI (with the password; never log it, log {@link #toString()})
   */
  public String uri() {
    return uri;
  }

  /**
   * The queue consumed.
   *
   * @return the queue name
   */
  public String queue() {
    return queue;
  }

  /**
   * The client-provided connection name shown in the management UI and {@code rabbitmqctl};
   * default {@code "idem-" + queue}.
   *
   * @return the connection name
   */
  public String connectionName() {
    return connectionName;
  }

  /**
   * The {@code basic.qos} prefetch: the most unacknowledged deliveries on the channel. Default
   * {@value #DEFAULT_PREFETCH}.
   *
   * @return the prefetch
   */
  public int prefetch() {
    return prefetch;
  }

  /**
   * Where the message id comes from. Default {@link MessageIdExtractor#messageIdProperty()}.
   *
   * @return the extractor
   */
  public MessageIdExtractor messageId() {
    return messageId;
  }

  /**
   * The ordering key rule for {@link dev.idem.Ordering#BY_KEY}. Default: none (messages are not
   * ordered against each other).
   *
   * @return the rule
   */
  public BiFunction<Envelope, AMQP.BasicProperties, @Nullable String> orderingKey() {
    return orderingKey;
  }

  /**
   * How messages are dead-lettered. Default {@link #DEFAULT_DEAD_LETTER_MODE}.
   *
   * @return the mode
   */
  public DeadLetterMode deadLetterMode() {
    return deadLetterMode;
  }

  /**
   * The exchange dead letters are published to in {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS}.
   * Default {@code queue + ".dlx"}, as declared by {@link RabbitTopology}.
   *
   * @return the exchange name ({@code ""} is the default exchange)
   */
  public String deadLetterExchange() {
    return deadLetterExchange;
  }

  /**
   * The routing key dead letters are published with. Default: the queue name.
   *
   * @return the routing key
   */
  public String deadLetterRoutingKey() {
    return deadLetterRoutingKey;
  }

  /**
   * The first wait before resubscribing after a lost connection or channel. Default 200 ms.
   *
   * @return the backoff
   */
  public Duration recoveryBackoff() {
    return recoveryBackoff;
  }

  /**
   * The longest wait between resubscription attempts. Default 10 s.
   *
   * @return the backoff
   */
  public Duration maxRecoveryBackoff() {
    return maxRecoveryBackoff;
  }

  /**
   * How long a dead-letter publish waits for the broker's confirm. Default 30 s.
   *
   * @return the timeout
   */
  public Duration confirmTimeout() {
    return confirmTimeout;
  }

  /**
   * Applied to the client's {@link ConnectionFactory} after the URI, e.g. for TLS. Default: none.
   *
   * @return the customizer
   */
  public Consumer<ConnectionFactory> connectionFactoryCustomizer() {
    return connectionFactoryCustomizer;
  }

  /**
   * A new client connection factory for these settings, with the client's automatic recovery
   * switched off: a {@link RabbitSource} recovers by opening a new connection and channel, so
   * that no acknowledgement is ever sent on a channel other than the one that delivered.
   *
   * @return a new factory
   */
  public ConnectionFactory newConnectionFactory() {
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(uri);
    } catch (java.security.GeneralSecurityException e) {
      // The security provider's message does not contain the URI.
      throw new IllegalArgumentException("uri " + maskPassword(uri) + " could not be used: " + e, e);
    } catch (URISyntaxException | RuntimeException e) {
      // Not chained: the client's messages can quote the URI or its decoded user info.
      throw new IllegalArgumentException("uri is invalid (" + e.getClass().getSimpleName() + "): " + maskPassword(uri));
    }
    connectionFactoryCustomizer.accept(factory);
    factory.setAutomaticRecoveryEnabled(false);
    factory.setTopologyRecoveryEnabled(false);
    return factory;
  }

  /**
   * Replaces the password of a URI with {@code ****}, for log lines and error messages. Works on
   * any text, however malformed: the scheme's case does not matter ({@code AMQP://},
   * {@code amqps://}), nor whether there is a scheme, a port or a path; everything between the
   * first {@code :} of the user info and the last {@code @} is masked, so a password that holds
   * an unescaped {@code @}, {@code /} or {@code :} is masked whole (a pathological URI may lose
   * more than its password, never less). Percent-encoded passwords are masked as written. Query
   * parameters named like secrets ({@code password}, {@code pass}, {@code pwd}, {@code secret},
   * {@code token}) are masked too. A user without a password is left alone.
   *
   * @param uri the URI or any text that contains one, may be {@code null}
   * @return the text without the password, {@code null} for {@code null}
   */
  public static @Nullable String maskPassword(@Nullable String uri) {
    if (uri == null) {
      return null;
    }
    return SECRET_PARAMETER.matcher(maskUserInfo(uri)).replaceAll("$1****");
  }

  private static String maskUserInfo(String text) {
    int schemeEnd = text.indexOf("://");
    int start = schemeEnd < 0 ? 0 : schemeEnd + 3;
    int at = text.lastIndexOf('@');
    if (at < start) {
      return text;
    }
    int colon = text.indexOf(':', start);
    if (colon < 0 || colon > at) {
      return text;
    }
    return text.substring(0, colon + 1) + "****" + text.substring(at);
  }

  @Override
  public String toString() {
    return "RabbitSourceOptions[uri=" + maskPassword(uri) + ", queue=" + queue + ", connectionName=" + connectionName
        + ", prefetch=" + prefetch + ", messageId=" + messageId + ", deadLetterMode=" + deadLetterMode
        + ", deadLetterExchange=" + deadLetterExchange + ", deadLetterRoutingKey=" + deadLetterRoutingKey
        + ", recoveryBackoff=" + recoveryBackoff + ", maxRecoveryBackoff=" + maxRecoveryBackoff
        + ", confirmTimeout=" + confirmTimeout + "]";
  }

  /** Builds {@link RabbitSourceOptions}; see each setter for its default. */
  public static final class Builder {
    private String uri = DEFAULT_URI;
    private final String queue;
    private @Nullable String connectionName;
    private int prefetch = DEFAULT_PREFETCH;
    private MessageIdExtractor messageId = MessageIdExtractor.messageIdProperty();
    private BiFunction<Envelope, AMQP.BasicProperties, @Nullable String> orderingKey = (envelope, properties) -> null;
    private DeadLetterMode deadLetterMode = DEFAULT_DEAD_LETTER_MODE;
    private @Nullable String deadLetterExchange;
    private @Nullable String deadLetterRoutingKey;
    private Duration recoveryBackoff = DEFAULT_RECOVERY_BACKOFF;
    private Duration maxRecoveryBackoff = DEFAULT_MAX_RECOVERY_BACKOFF;
    private Duration confirmTimeout = DEFAULT_CONFIRM_TIMEOUT;
    private Consumer<ConnectionFactory> connectionFactoryCustomizer = factory -> {};

    private Builder(String queue) {
      this.queue = queue;
    }

    /**
     * The broker URI. Default {@value RabbitSourceOptions#DEFAULT_URI}.
     *
     * @param uri an {@code amqp://} or {@code amqps://} URI (the scheme in any case); errors and
     *     {@link RabbitSourceOptions#toString()} show it with the password masked
     * @return this builder
     */
    public Builder uri(String uri) {
      this.uri = Objects.requireNonNull(uri, "uri");
      return this;
    }

    /**
     * The client-provided connection name. Default {@code "idem-" + queue}.
     *
     * @param connectionName the name
     * @return this builder
     */
    public Builder connectionName(String connectionName) {
      this.connectionName = Objects.requireNonNull(connectionName, "connectionName");
      return this;
    }

    /**
     * The {@code basic.qos} prefetch. Default {@value RabbitSourceOptions#DEFAULT_PREFETCH}.
     *
     * @param prefetch 1 to {@value RabbitSourceOptions#MAX_PREFETCH}; at least the pipeline's concurrency
     * @return this builder
     */
    public Builder prefetch(int prefetch) {
      this.prefetch = prefetch;
      return this;
    }

    /**
     * Where the message id comes from. Default {@link MessageIdExtractor#messageIdProperty()}.
     *
     * @param messageId the extractor
     * @return this builder
     */
    public Builder messageId(MessageIdExtractor messageId) {
      this.messageId = Objects.requireNonNull(messageId, "messageId");
      return this;
    }

    /**
     * The ordering key for {@link dev.idem.Ordering#BY_KEY}, e.g. a header with an account id.
     * Default: none.
     *
     * @param orderingKey returns the key or {@code null}
     * @return this builder
     */
    public Builder orderingKey(BiFunction<Envelope, AMQP.BasicProperties, @Nullable String> orderingKey) {
      this.orderingKey = Objects.requireNonNull(orderingKey, "orderingKey");
      return this;
    }

    /**
     * How messages are dead-lettered. Default {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS}.
     *
     * @param deadLetterMode the mode
     * @return this builder
     */
    public Builder deadLetterMode(DeadLetterMode deadLetterMode) {
      this.deadLetterMode = Objects.requireNonNull(deadLetterMode, "deadLetterMode");
      return this;
    }

    /**
     * Where dead letters are published. Default: exchange {@code queue + ".dlx"}, routing key
     * {@code queue}, as declared by {@link RabbitTopology}. Use {@code ("", dlqName)} to publish
     * straight to a queue through the default exchange.
     *
     * @param exchange the exchange ({@code ""} for the default exchange)
     * @param routingKey the routing key
     * @return this builder
     */
    public Builder deadLetterTo(String exchange, String routingKey) {
      this.deadLetterExchange = Objects.requireNonNull(exchange, "deadLetterExchange");
      this.deadLetterRoutingKey = Objects.requireNonNull(routingKey, "deadLetterRoutingKey");
      return this;
    }

    /**
     * Backoff between resubscription attempts after a lost connection or channel (exponential
     * with jitter, reset once deliveries flow again). Default 200 ms to 10 s.
     *
     * @param first the first wait, positive
     * @param max the longest wait, not shorter than {@code first}
     * @return this builder
     */
    public Builder recoveryBackoff(Duration first, Duration max) {
      this.recoveryBackoff = Objects.requireNonNull(first, "recoveryBackoff");
      this.maxRecoveryBackoff = Objects.requireNonNull(max, "maxRecoveryBackoff");
      return this;
    }

    /**
     * How long a dead-letter publish waits for the broker's confirm. Default 30 s.
     *
     * @param confirmTimeout positive
     * @return this builder
     */
    public Builder confirmTimeout(Duration confirmTimeout) {
      this.confirmTimeout = Objects.requireNonNull(confirmTimeout, "confirmTimeout");
      return this;
    }

    /**
     * Customizes the client's {@link ConnectionFactory} after the URI was applied (TLS,
     * heartbeat, timeouts). Automatic recovery is switched off afterwards whatever it sets.
     *
     * @param customizer the customizer
     * @return this builder
     */
    public Builder connectionFactoryCustomizer(Consumer<ConnectionFactory> customizer) {
      this.connectionFactoryCustomizer = Objects.requireNonNull(customizer, "connectionFactoryCustomizer");
      return this;
    }

    /**
     * Validates the settings.
     *
     * @return the options
     * @throws IllegalArgumentException naming the setting that is invalid
     */
    public RabbitSourceOptions build() {
      if (queue == null || queue.isBlank()) {
        throw new IllegalArgumentException("queue must not be blank");
      }
      if (queue.length() > 255) {
        throw new IllegalArgumentException("queue must be at most 255 characters, was " + queue.length());
      }
      if (queue.startsWith("amq.")) {
        throw new IllegalArgumentException("queue must not start with the reserved prefix 'amq.', was " + queue);
      }
      if (prefetch < 1 || prefetch > MAX_PREFETCH) {
        throw new IllegalArgumentException("prefetch must be between 1 and " + MAX_PREFETCH + ", was " + prefetch);
      }
      URI parsed;
      try {
        parsed = new URI(uri);
      } catch (URISyntaxException e) {
        // Not chained: the exception's message quotes the whole URI, password included.
        throw new IllegalArgumentException("uri is not a valid URI (" + e.getReason() + " at index " + e.getIndex() + "): "
            + maskPassword(uri));
      }
      String scheme = parsed.getScheme();
      if (scheme == null || !(scheme.equalsIgnoreCase("amqp") || scheme.equalsIgnoreCase("amqps"))) {
        throw new IllegalArgumentException("uri must start with amqp:// or amqps://, was " + maskPassword(uri));
      }
      if (parsed.getRawAuthority() != null && parsed.getHost() == null) {
        throw new IllegalArgumentException("uri has no valid host, was " + maskPassword(uri));
      }
      if (connectionName != null && connectionName.isBlank()) {
        throw new IllegalArgumentException("connectionName must not be blank");
      }
      if (deadLetterMode == DeadLetterMode.PUBLISH_WITH_CONFIRMS && deadLetterExchange != null
          && deadLetterExchange.isEmpty() && (deadLetterRoutingKey == null || deadLetterRoutingKey.isBlank())) {
        throw new IllegalArgumentException(
            "deadLetterRoutingKey must name a queue when deadLetterExchange is the default exchange \"\"");
      }
      if (deadLetterExchange != null && deadLetterExchange.isEmpty() && queue.equals(deadLetterRoutingKey)) {
        throw new IllegalArgumentException(
            "deadLetterTo(\"\", \"" + queue + "\") would publish dead letters back to the consumed queue");
      }
      requirePositive(recoveryBackoff, "recoveryBackoff");
      requirePositive(maxRecoveryBackoff, "maxRecoveryBackoff");
      requirePositive(confirmTimeout, "confirmTimeout");
      if (maxRecoveryBackoff.compareTo(recoveryBackoff) < 0) {
        throw new IllegalArgumentException(
            "maxRecoveryBackoff (" + maxRecoveryBackoff + ") must not be shorter than recoveryBackoff (" + recoveryBackoff + ")");
      }
      return new RabbitSourceOptions(this);
    }

    private static void requirePositive(Duration d, String name) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(name + " must be positive, was " + d);
      }
    }
  }
}
