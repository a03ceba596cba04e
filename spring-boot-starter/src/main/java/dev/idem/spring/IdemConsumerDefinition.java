package dev.idem.spring;

import static dev.idem.internal.Arguments.requirePositive;

import dev.idem.BatchHandler;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A consumer declared as a bean: its name, source and handler, plus any setting of
 * {@link IdempotentConsumer.Builder}. The starter supplies what comes from the application (the
 * inbox, the transaction runner on Spring's transactions, meters, tracing), starts the consumer
 * when the context has started, stops it gracefully on shutdown and reports its health, exactly
 * as for consumers declared under {@code idem.consumers.*}.
 *
 * <pre>{@code
 * @Bean
 * IdemConsumerDefinition<String> audit(KafkaSourceOptions<String> options, AuditHandler handler) {
 *   return IdemConsumerDefinition.<String>named("audit")
 *       .source(() -> {
 *         KafkaSource<String> kafka = KafkaSource.create(options);
 *         return ConsumerSource.of(kafka::receive, kafka);
 *       })
 *       .handler(handler)
 *       .configure(builder -> builder.concurrency(4).ordering(Ordering.UNORDERED))
 *       .build();
 * }
 * }</pre>
 *
 * <p>Set the transaction timeout here, not through {@link Builder#configure}: the starter derives
 * PostgreSQL's statement and lock timeouts from it. Immutable.
 *
 * @param <T> the payload type
 */
public final class IdemConsumerDefinition<T> {

  /** Default time messages in flight get to finish at shutdown: 20 s. */
  public static final Duration DEFAULT_SHUTDOWN_GRACE_PERIOD = Duration.ofSeconds(20);
  /** Default age of the oldest unsettled message above which health is DOWN: 5 min. */
  public static final Duration DEFAULT_MAX_OLDEST_UNSETTLED_AGE = Duration.ofMinutes(5);
  /** Default failures in a row after which health is DOWN: {@value}. */
  public static final int DEFAULT_MAX_FAILURES_IN_A_ROW = 10;

  private final String name;
  private final Supplier<? extends ConsumerSource<T>> source;
  private final @Nullable Handler<T> handler;
  private final @Nullable BatchHandler<T> batchHandler;
  private final Consumer<IdempotentConsumer.Builder<T>> customizer;
  private final Duration transactionTimeout;
  private final Duration shutdownGracePeriod;
  private final Duration maxOldestUnsettledAge;
  private final int maxFailuresInARow;

  private IdemConsumerDefinition(Builder<T> b) {
    this.name = b.name;
    this.source = Objects.requireNonNull(b.source, "source, checked by build()");
    this.handler = b.handler;
    this.batchHandler = b.batchHandler;
    this.customizer = b.customizer;
    this.transactionTimeout = b.transactionTimeout;
    this.shutdownGracePeriod = b.shutdownGracePeriod;
    this.maxOldestUnsettledAge = b.maxOldestUnsettledAge;
    this.maxFailuresInARow = b.maxFailuresInARow;
  }

  /**
   * Starts a definition.
   *
   * @param name the consumer name, part of the dedup key
   * @param <T> the payload type
   * @return a builder
   */
  public static <T> Builder<T> named(String name) {
    return new Builder<>(name);
  }

  /**
   * The consumer name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * Creates the source; called once per start.
   *
   * @return the source
   */
  public ConsumerSource<T> createSource() {
    return Objects.requireNonNull(source.get(), "the source supplier of consumer '" + name + "' returned null");
  }

  /**
   * The transaction timeout.
   *
   * @return the timeout
   */
  public Duration transactionTimeout() {
    return transactionTimeout;
  }

  /**
   * The shutdown grace period.
   *
   * @return the grace period
   */
  public Duration shutdownGracePeriod() {
    return shutdownGracePeriod;
  }

  /**
   * The oldest-unsettled age above which health is DOWN.
   *
   * @return the age
   */
  public Duration maxOldestUnsettledAge() {
    return maxOldestUnsettledAge;
  }

  /**
   * The failures in a row after which health is DOWN.
   *
   * @return the count
   */
  public int maxFailuresInARow() {
    return maxFailuresInARow;
  }

  /**
   * Applies the handler and the customizations to a builder that already has the inbox, the
   * transaction runner, the metrics and the transaction timeout.
   *
   * @param builder the builder
   * @return the builder
   */
  public IdempotentConsumer.Builder<T> applyTo(IdempotentConsumer.Builder<T> builder) {
    if (handler != null) {
      builder.handler(handler);
    } else {
      builder.batchHandler(Objects.requireNonNull(batchHandler, "build() requires a handler or a batchHandler"));
    }
    customizer.accept(builder);
    return builder;
  }

  @Override
  public String toString() {
    return "IdemConsumerDefinition[" + name + "]";
  }

  /**
   * Configures an {@link IdemConsumerDefinition}. Setters check their argument; {@link #build()}
   * checks that a source and a handler are present.
   *
   * @param <T> the payload type
   */
  public static final class Builder<T> {
    private final String name;
    private @Nullable Supplier<? extends ConsumerSource<T>> source;
    private @Nullable Handler<T> handler;
    private @Nullable BatchHandler<T> batchHandler;
    private Consumer<IdempotentConsumer.Builder<T>> customizer = b -> {};
    private Duration transactionTimeout = IdempotentConsumer.DEFAULT_TRANSACTION_TIMEOUT;
    private Duration shutdownGracePeriod = DEFAULT_SHUTDOWN_GRACE_PERIOD;
    private Duration maxOldestUnsettledAge = DEFAULT_MAX_OLDEST_UNSETTLED_AGE;
    private int maxFailuresInARow = DEFAULT_MAX_FAILURES_IN_A_ROW;

    private Builder(String name) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("name must not be blank");
      }
      this.name = name;
    }

    /**
     * Creates the source at each start. Required.
     *
     * @param source the source factory
     * @return this builder
     */
    public Builder<T> source(Supplier<? extends ConsumerSource<T>> source) {
      this.source = Objects.requireNonNull(source, "source");
      return this;
    }

    /**
     * The per-message effect; this or {@link #batchHandler}.
     *
     * @param handler the handler
     * @return this builder
     */
    public Builder<T> handler(Handler<T> handler) {
      this.handler = Objects.requireNonNull(handler, "handler");
      return this;
    }

    /**
     * The set-based effect; this or {@link #handler}.
     *
     * @param batchHandler the batch handler
     * @return this builder
     */
    public Builder<T> batchHandler(BatchHandler<T> batchHandler) {
      this.batchHandler = Objects.requireNonNull(batchHandler, "batchHandler");
      return this;
    }

    /**
     * Further settings of the core builder (concurrency, prefetch, ordering, retry, batching,
     * error classifier). Default: none.
     *
     * @param customizer changes the builder
     * @return this builder
     */
    public Builder<T> configure(Consumer<IdempotentConsumer.Builder<T>> customizer) {
      this.customizer = Objects.requireNonNull(customizer, "configure");
      return this;
    }

    /**
     * The longest time one transaction attempt may take. Default 60 s.
     *
     * @param timeout positive
     * @return this builder
     */
    public Builder<T> transactionTimeout(Duration timeout) {
      this.transactionTimeout = requirePositive(timeout, "transactionTimeout");
      return this;
    }

    /**
     * How long messages in flight get at shutdown. Default 20 s.
     *
     * @param gracePeriod zero or positive
     * @return this builder
     */
    public Builder<T> shutdownGracePeriod(Duration gracePeriod) {
      Objects.requireNonNull(gracePeriod, "shutdownGracePeriod");
      if (gracePeriod.isNegative()) {
        throw new IllegalArgumentException("shutdownGracePeriod must not be negative, was " + gracePeriod);
      }
      this.shutdownGracePeriod = gracePeriod;
      return this;
    }

    /**
     * When health is DOWN. Defaults 5 min and {@value IdemConsumerDefinition#DEFAULT_MAX_FAILURES_IN_A_ROW}.
     *
     * @param maxOldestUnsettledAge DOWN while the oldest unsettled message is older; positive
     * @param maxFailuresInARow DOWN after this many failures without a settlement; at least 1
     * @return this builder
     */
    public Builder<T> health(Duration maxOldestUnsettledAge, int maxFailuresInARow) {
      this.maxOldestUnsettledAge = requirePositive(maxOldestUnsettledAge, "maxOldestUnsettledAge");
      if (maxFailuresInARow < 1) {
        throw new IllegalArgumentException("maxFailuresInARow must be at least 1, was " + maxFailuresInARow);
      }
      this.maxFailuresInARow = maxFailuresInARow;
      return this;
    }

    /**
     * Checks and builds the definition.
     *
     * @return the definition
     * @throws IllegalArgumentException naming what is missing
     */
    public IdemConsumerDefinition<T> build() {
      if (source == null) {
        throw new IllegalArgumentException("consumer '" + name + "': source is required");
      }
      if (handler == null && batchHandler == null) {
        throw new IllegalArgumentException("consumer '" + name + "': handler or batchHandler is required");
      }
      if (handler != null && batchHandler != null) {
        throw new IllegalArgumentException("consumer '" + name + "': set either handler or batchHandler, not both");
      }
      return new IdemConsumerDefinition<>(this);
    }
  }
}
