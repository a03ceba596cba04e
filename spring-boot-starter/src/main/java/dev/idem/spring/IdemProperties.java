package dev.idem.spring;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.RetryPolicy;
import dev.idem.postgres.PostgresInbox;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Idem's configuration: the inbox table and the consumers declared under
 * {@code idem.consumers.<name>.*}.
 *
 * <pre>{@code
 * idem:
 *   consumers:
 *     payments:
 *       handler: paymentHandler          # a bean implementing dev.idem.Handler or dev.idem.BatchHandler
 *       payload-type: com.example.Payment # JSON through Jackson; "string" (default) or "bytes" otherwise
 *       concurrency: 8
 *       source:
 *         type: kafka
 *         bootstrap-servers: localhost:9092
 *         topics: payments
 * }</pre>
 *
 * <p>Every setting left out takes the default of the core or adapter option it maps to (named on
 * each property). A consumer's name is its key under {@code idem.consumers}; it is the dedup key's
 * consumer part, so renaming it makes every message new again.
 */
@ConfigurationProperties("idem")
public class IdemProperties {

  private final Inbox inbox = new Inbox();
  private Map<String, Consumer> consumers = new LinkedHashMap<>();
  private boolean autoStartup = true;

  /** Creates the properties with their defaults. */
  public IdemProperties() {}

  /**
   * Whether the consumers start with the application context. Default {@code true}; with
   * {@code false} they start when {@link IdemConsumers#start()} is called.
   *
   * @return whether the consumers start by themselves
   */
  public boolean isAutoStartup() {
    return autoStartup;
  }

  /**
   * Sets whether the consumers start with the context.
   *
   * @param autoStartup whether the consumers start by themselves
   */
  public void setAutoStartup(boolean autoStartup) {
    this.autoStartup = autoStartup;
  }

  /**
   * The inbox table.
   *
   * @return the inbox settings
   */
  public Inbox getInbox() {
    return inbox;
  }

  /**
   * The consumers by name.
   *
   * @return the consumers, in declaration order
   */
  public Map<String, Consumer> getConsumers() {
    return consumers;
  }

  /**
   * Sets the consumers.
   *
   * @param consumers the consumers by name
   */
  public void setConsumers(Map<String, Consumer> consumers) {
    this.consumers = consumers;
  }

  /** The inbox table ({@code idem.inbox.*}). */
  public static class Inbox {
    private String table = PostgresInbox.DEFAULT_TABLE;
    private boolean createSchema = true;

    /** Creates the settings with their defaults. */
    public Inbox() {}

    /**
     * The table, a plain (optionally schema-qualified) SQL identifier. Default
     * {@value PostgresInbox#DEFAULT_TABLE}.
     *
     * @return the table
     */
    public String getTable() {
      return table;
    }

    /**
     * Sets the table.
     *
     * @param table the table
     */
    public void setTable(String table) {
      this.table = table;
    }

    /**
     * Whether the table is created at start when it does not exist ({@code CREATE TABLE IF NOT
     * EXISTS}, safe to run from several instances at once). Default {@code true}; turn it off when
     * Flyway or Liquibase runs the shipped migration.
     *
     * @return whether to create the table
     */
    public boolean isCreateSchema() {
      return createSchema;
    }

    /**
     * Sets whether the table is created at start.
     *
     * @param createSchema whether to create the table
     */
    public void setCreateSchema(boolean createSchema) {
      this.createSchema = createSchema;
    }
  }

  /** One consumer ({@code idem.consumers.<name>.*}). */
  public static class Consumer {
    private boolean enabled = true;
    private @Nullable String handler;
    private String payloadType = "string";
    private @Nullable String decoder;
    private int concurrency = IdempotentConsumer.DEFAULT_CONCURRENCY;
    private int prefetch = IdempotentConsumer.DEFAULT_PREFETCH;
    private Ordering ordering = IdempotentConsumer.DEFAULT_ORDERING;
    private @Nullable Integer maxBatchSize;
    private Duration batchMaxWait = Duration.ZERO;
    private Duration slowMessageThreshold = IdempotentConsumer.DEFAULT_SLOW_MESSAGE_THRESHOLD;
    private Duration transactionTimeout = IdempotentConsumer.DEFAULT_TRANSACTION_TIMEOUT;
    private Duration shutdownGracePeriod = IdemConsumerDefinition.DEFAULT_SHUTDOWN_GRACE_PERIOD;
    private final Retry retry = new Retry();
    private final Health health = new Health();
    private final Source source = new Source();

    /** Creates the settings with their defaults. */
    public Consumer() {}

    /**
     * Whether the consumer runs. Default {@code true}.
     *
     * @return whether the consumer runs
     */
    public boolean isEnabled() {
      return enabled;
    }

    /**
     * Sets whether the consumer runs.
     *
     * @param enabled whether the consumer runs
     */
    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    /**
     * The name of the bean that applies the effect: a {@code dev.idem.Handler} or a
     * {@code dev.idem.BatchHandler}. Required.
     *
     * @return the bean name, or {@code null} when not set
     */
    public @Nullable String getHandler() {
      return handler;
    }

    /**
     * Sets the handler bean's name.
     *
     * @param handler the bean name
     */
    public void setHandler(@Nullable String handler) {
      this.handler = handler;
    }

    /**
     * How message bodies become payloads: {@code string} (UTF-8, the default), {@code bytes}
     * (the raw body), or a fully qualified class name, read as JSON with the application's
     * Jackson 3 {@code JsonMapper} (Jackson must be on the class path). A body that cannot be
     * decoded is dead-lettered as an undecodable payload.
     *
     * @return the payload type
     */
    public String getPayloadType() {
      return payloadType;
    }

    /**
     * Sets the payload type.
     *
     * @param payloadType {@code string}, {@code bytes} or a class name
     */
    public void setPayloadType(String payloadType) {
      this.payloadType = payloadType;
    }

    /**
     * The name of a {@link MessageDecoder} bean that decodes bodies instead of
     * {@link #getPayloadType() payload-type}. Default: none.
     *
     * @return the bean name, or {@code null}
     */
    public @Nullable String getDecoder() {
      return decoder;
    }

    /**
     * Sets the decoder bean's name.
     *
     * @param decoder the bean name
     */
    public void setDecoder(@Nullable String decoder) {
      this.decoder = decoder;
    }

    /**
     * Messages processed at once; keep it at most {@code spring.r2dbc.pool.max-size}. Default
     * {@value IdempotentConsumer#DEFAULT_CONCURRENCY}.
     *
     * @return the concurrency
     */
    public int getConcurrency() {
      return concurrency;
    }

    /**
     * Sets the concurrency.
     *
     * @param concurrency at least 1
     */
    public void setConcurrency(int concurrency) {
      this.concurrency = concurrency;
    }

    /**
     * Messages requested ahead of processing, in the pipeline and at the source (Kafka's
     * {@code max.poll.records}, RabbitMQ's {@code basic.qos}). Default
     * {@value IdempotentConsumer#DEFAULT_PREFETCH}.
     *
     * @return the prefetch
     */
    public int getPrefetch() {
      return prefetch;
    }

    /**
     * Sets the prefetch.
     *
     * @param prefetch at least 1
     */
    public void setPrefetch(int prefetch) {
      this.prefetch = prefetch;
    }

    /**
     * Which messages may overlap. Default {@code by-key}.
     *
     * @return the ordering
     */
    public Ordering getOrdering() {
      return ordering;
    }

    /**
     * Sets the ordering.
     *
     * @param ordering {@code by-key}, {@code by-partition} or {@code unordered}
     */
    public void setOrdering(Ordering ordering) {
      this.ordering = ordering;
    }

    /**
     * The largest micro-batch sharing one transaction; 1 turns batching off. When not set, the
     * core's default applies: {@value IdempotentConsumer#DEFAULT_MAX_BATCH_SIZE}, or the system
     * property {@value IdempotentConsumer#MAX_BATCH_SIZE_PROPERTY} when given.
     *
     * @return the largest batch, or {@code null} when not set
     */
    public @Nullable Integer getMaxBatchSize() {
      return maxBatchSize;
    }

    /**
     * Sets the largest batch.
     *
     * @param maxBatchSize at least 1, or {@code null} for the core's default
     */
    public void setMaxBatchSize(@Nullable Integer maxBatchSize) {
      this.maxBatchSize = maxBatchSize;
    }

    /**
     * How long an idle batch lane waits for more messages. Default 0 (start at once).
     *
     * @return the wait
     */
    public Duration getBatchMaxWait() {
      return batchMaxWait;
    }

    /**
     * Sets the batch wait.
     *
     * @param batchMaxWait zero or positive
     */
    public void setBatchMaxWait(Duration batchMaxWait) {
      this.batchMaxWait = batchMaxWait;
    }

    /**
     * How long a per-message handler may run inside a micro-batch before its message is detached
     * from the batch (which commits without it) and continues on its own. Default 2 s.
     *
     * @return the threshold
     */
    public Duration getSlowMessageThreshold() {
      return slowMessageThreshold;
    }

    /**
     * Sets the slow-message threshold.
     *
     * @param slowMessageThreshold positive
     */
    public void setSlowMessageThreshold(Duration slowMessageThreshold) {
      this.slowMessageThreshold = slowMessageThreshold;
    }

    /**
     * The longest time one transaction attempt may take; PostgreSQL's statement, lock and
     * idle-in-transaction timeouts are derived from it. Default 60 s.
     *
     * @return the timeout
     */
    public Duration getTransactionTimeout() {
      return transactionTimeout;
    }

    /**
     * Sets the transaction timeout.
     *
     * @param transactionTimeout positive
     */
    public void setTransactionTimeout(Duration transactionTimeout) {
      this.transactionTimeout = transactionTimeout;
    }

    /**
     * How long messages in flight get to finish and settle when the application shuts down;
     * what is still running then is rolled back and redelivered later. Keep it below
     * {@code spring.lifecycle.timeout-per-shutdown-phase} (30 s by default). Default 20 s.
     *
     * @return the grace period
     */
    public Duration getShutdownGracePeriod() {
      return shutdownGracePeriod;
    }

    /**
     * Sets the shutdown grace period.
     *
     * @param shutdownGracePeriod zero or positive
     */
    public void setShutdownGracePeriod(Duration shutdownGracePeriod) {
      this.shutdownGracePeriod = shutdownGracePeriod;
    }

    /**
     * Retry settings.
     *
     * @return the retry settings
     */
    public Retry getRetry() {
      return retry;
    }

    /**
     * Health settings.
     *
     * @return the health settings
     */
    public Health getHealth() {
      return health;
    }

    /**
     * Where messages come from.
     *
     * @return the source settings
     */
    public Source getSource() {
      return source;
    }
  }

  /**
   * Retries of a consumer ({@code idem.consumers.<name>.retry.*}); defaults of {@link RetryPolicy#defaults()}.
   *
   * <p>Its settings are {@link IdemRetryProperties}'s; this name stays for the code that uses it.
   */
  public static class Retry extends IdemRetryProperties {

    /** Creates the settings with their defaults. */
    public Retry() {}
  }

  /** When the consumer's health indicator says DOWN ({@code idem.consumers.<name>.health.*}). */
  public static class Health {
    private Duration maxOldestUnsettledAge = IdemConsumerDefinition.DEFAULT_MAX_OLDEST_UNSETTLED_AGE;
    private int maxFailuresInARow = IdemConsumerDefinition.DEFAULT_MAX_FAILURES_IN_A_ROW;

    /** Creates the settings with their defaults. */
    public Health() {}

    /**
     * DOWN while the oldest message received and not yet settled is older than this (a stuck
     * message, or a backlog the consumer does not keep up with). Default 5 min.
     *
     * @return the age
     */
    public Duration getMaxOldestUnsettledAge() {
      return maxOldestUnsettledAge;
    }

    /**
     * Sets the age.
     *
     * @param maxOldestUnsettledAge positive
     */
    public void setMaxOldestUnsettledAge(Duration maxOldestUnsettledAge) {
      this.maxOldestUnsettledAge = maxOldestUnsettledAge;
    }

    /**
     * DOWN after this many failures in a row without a message settled in between: attempts
     * that failed on infrastructure (database unreachable, timeouts) and settlements the broker
     * adapter could not complete. Default {@value IdemConsumerDefinition#DEFAULT_MAX_FAILURES_IN_A_ROW}.
     *
     * @return the failures
     */
    public int getMaxFailuresInARow() {
      return maxFailuresInARow;
    }

    /**
     * Sets the failures.
     *
     * @param maxFailuresInARow at least 1
     */
    public void setMaxFailuresInARow(int maxFailuresInARow) {
      this.maxFailuresInARow = maxFailuresInARow;
    }
  }

  /**
   * A consumer's source ({@code idem.consumers.<name>.source.*}). {@code type} says which
   * settings apply; setting one of the other type's fails at start naming it.
   *
   * <p>Its settings are {@link IdemSourceProperties}'s; this name stays for the code that uses it.
   */
  public static class Source extends IdemSourceProperties {

    /** Creates the settings with their defaults. */
    public Source() {}
  }

  /**
   * The engine of a Kafka source ({@code idem.consumers.<name>.source.engine}); the constants of
   * {@code dev.idem.kafka.KafkaEngine}, named here so that these properties load without
   * idem-kafka.
   */
  public enum KafkaEngineType {
    /** {@code native}, the default: Idem's engine on kafka-clients 3.9.x and 4.x. */
    NATIVE,
    /** {@code reactor-kafka}: Reactor Kafka 1.3.25, on kafka-clients 3.x only; the application adds reactor-kafka. */
    REACTOR_KAFKA
  }

  /** The broker of a configured source. */
  public enum SourceType {
    /** Kafka, through {@code dev.idem.kafka.KafkaSource}. */
    KAFKA,
    /**
     * {@code kafka-share}: a Kafka share group (queues for Kafka), through
     * {@code dev.idem.kafka.KafkaShareSource}; the consumer's {@code ordering} must be
     * {@code unordered}.
     */
    KAFKA_SHARE,
    /** RabbitMQ, through {@code dev.idem.rabbit.RabbitSource}. */
    RABBITMQ
  }
}
