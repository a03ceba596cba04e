package dev.idem.kafka;

import static dev.idem.internal.Arguments.requirePositive;
import static dev.idem.internal.Arguments.requireText;

import dev.idem.IdempotentConsumer;
import dev.idem.kafka.internal.OptionRules;
import dev.idem.kafka.internal.Secrets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.UnaryOperator;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;

/**
 * Immutable settings of a {@link KafkaSource}: where to consume from, how to decode and identify
 * records, how far to read ahead, how offsets are committed and where dead letters go.
 *
 * <p>Build with {@link #builder()}; setters refuse {@code null}, blank texts and non-positive durations, and
 * {@link Builder#build() build()} checks the ranges and that required settings are present and consistent.
 * {@link #toString()} masks secrets (passwords, JAAS configuration, tokens) in the client
 * properties.
 *
 * <p>Defaults: message id header {@value #DEFAULT_MESSAGE_ID_HEADER}, prefetch
 * {@value #DEFAULT_PREFETCH} records, at most {@value #DEFAULT_MAX_DEFERRED_COMMITS} settled
 * records waiting behind an unsettled earlier one, commits every
 * {@link #DEFAULT_COMMIT_INTERVAL} or {@value #DEFAULT_COMMIT_BATCH_SIZE} settled records,
 * {@link #DEFAULT_REVOCATION_GRACE_PERIOD} for revoked partitions to finish, dead letters to
 * {@code <topic>}{@value #DEFAULT_DEAD_LETTER_SUFFIX}, partitions held by a failed dead letter
 * logged again every {@link #DEFAULT_HELD_COMMITS_LOG_INTERVAL},
 * {@code auto.offset.reset=earliest}, {@code isolation.level=read_committed} and the cooperative-sticky assignor.
 *
 * @param <T> the payload type
 */
public final class KafkaSourceOptions<T> {

  /** Default header carrying the message id: {@value}. */
  public static final String DEFAULT_MESSAGE_ID_HEADER = "message-id";
  /** Default records fetched per poll and buffered ahead of the pipeline: {@value}; the same as core's default prefetch. */
  public static final int DEFAULT_PREFETCH = IdempotentConsumer.DEFAULT_PREFETCH;
  /** Default limit of settled records waiting for an earlier record of their partition: {@value}. */
  public static final int DEFAULT_MAX_DEFERRED_COMMITS = 1024;
  /** Default longest time a committable offset waits before it is committed: 1 s. */
  public static final Duration DEFAULT_COMMIT_INTERVAL = Duration.ofSeconds(1);
  /** Default number of settled records that triggers a commit before the interval ends: {@value}. */
  public static final int DEFAULT_COMMIT_BATCH_SIZE = 100;
  /** Default time revoked partitions get to settle and commit their work in flight: 10 s. */
  public static final Duration DEFAULT_REVOCATION_GRACE_PERIOD = Duration.ofSeconds(10);
  /** Default time to commit and close the consumer when the stream is cancelled: 10 s. */
  public static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(10);
  /** Default dead-letter topic suffix: {@value}. */
  public static final String DEFAULT_DEAD_LETTER_SUFFIX = ".DLT";
  /** Default first wait before the consumer is recreated after a fatal consumer error: 1 s. */
  public static final Duration DEFAULT_RECONNECT_BACKOFF = Duration.ofSeconds(1);
  /** Default longest wait between consumer recreations: 30 s. */
  public static final Duration DEFAULT_RECONNECT_MAX_BACKOFF = Duration.ofSeconds(30);
  /** Default time between the ERROR lines about a partition whose commits a record with a failed dead letter holds: 60 s. */
  public static final Duration DEFAULT_HELD_COMMITS_LOG_INTERVAL = Duration.ofSeconds(60);
  /** Default engine: {@link KafkaEngine#NATIVE}, on kafka-clients alone. */
  public static final KafkaEngine DEFAULT_ENGINE = KafkaEngine.NATIVE;
  /** Default {@code auto.offset.reset}: {@value}, so a new group misses nothing. */
  public static final String DEFAULT_AUTO_OFFSET_RESET = "earliest";

  /** The settings, a copy of the builder's: a builder may go on changing after {@code build()}. */
  private final Builder<T> settings;

  private KafkaSourceOptions(Builder<T> b) {
    this.settings = new Builder<>(b);
  }

  /**
   * Starts a builder.
   *
   * @param <T> the payload type
   * @return a builder with the defaults
   */
  public static <T> Builder<T> builder() {
    return new Builder<>();
  }

  /** @return the bootstrap servers */
  public String bootstrapServers() {
    return Objects.requireNonNull(settings.bootstrapServers, "bootstrapServers, checked by build()");
  }

  /** @return the consumer group id */
  public String groupId() {
    return Objects.requireNonNull(settings.groupId, "groupId, checked by build()");
  }

  /** @return the subscribed topics */
  public List<String> topics() {
    return settings.topics;
  }

  /** @return the value deserializer */
  public Deserializer<T> valueDeserializer() {
    return Objects.requireNonNull(settings.valueDeserializer, "valueDeserializer, checked by build()");
  }

  /** @return the header read for the message id */
  public String messageIdHeader() {
    return settings.messageIdHeader;
  }

  /** @return the id extractor, or {@code null} when the header is used */
  public @Nullable MessageIdExtractor<T> messageIdExtractor() {
    return settings.messageIdExtractor;
  }

  /** @return whether records without an id get {@code topic/partition/offset} */
  public boolean offsetFallbackId() {
    return settings.offsetFallbackId;
  }

  /** @return records fetched per poll and buffered ahead */
  public int prefetch() {
    return settings.prefetch;
  }

  /** @return the limit of settled records waiting behind an unsettled one */
  public int maxDeferredCommits() {
    return settings.maxDeferredCommits;
  }

  /** @return the commit interval */
  public Duration commitInterval() {
    return settings.commitInterval;
  }

  /** @return the commit batch size */
  public int commitBatchSize() {
    return settings.commitBatchSize;
  }

  /** @return the grace period of revoked partitions */
  public Duration revocationGracePeriod() {
    return settings.revocationGracePeriod;
  }

  /** @return the close timeout */
  public Duration closeTimeout() {
    return settings.closeTimeout;
  }

  /**
   * The dead-letter topic of a source topic.
   *
   * @param topic a subscribed topic
   * @return its dead-letter topic
   */
  public String deadLetterTopic(String topic) {
    return settings.deadLetterTopic.apply(topic);
  }

  /** @return the first reconnect backoff */
  public Duration reconnectBackoff() {
    return settings.reconnectBackoff;
  }

  /** @return the longest reconnect backoff */
  public Duration reconnectMaxBackoff() {
    return settings.reconnectMaxBackoff;
  }

  /** @return the time between the ERROR lines about partitions whose commits are held */
  public Duration heldCommitsLogInterval() {
    return settings.heldCommitsLogInterval;
  }

  /** @return extra consumer properties, unmodifiable */
  public Map<String, Object> consumerProperties() {
    return settings.consumerProperties;
  }

  /** @return extra dead-letter producer properties, unmodifiable */
  public Map<String, Object> producerProperties() {
    return settings.producerProperties;
  }

  /**
   * The Micrometer {@code MeterRegistry}, typed {@code Object} so that Micrometer stays an
   * optional dependency.
   *
   * @return the registry or {@code null}
   */
  public @Nullable Object meterRegistry() {
    return settings.meterRegistry;
  }

  /**
   * The engine the source runs on.
   *
   * @return the engine; default {@link KafkaEngine#NATIVE}
   */
  public KafkaEngine engine() {
    return settings.engine;
  }

  @Override
  public String toString() {
    return "KafkaSourceOptions[bootstrapServers=" + settings.bootstrapServers + ", groupId=" + settings.groupId + ", topics="
        + settings.topics
        + ", valueDeserializer=" + valueDeserializer().getClass().getName()
        + ", messageIdHeader=" + settings.messageIdHeader + ", messageIdExtractor=" + (settings.messageIdExtractor != null)
        + ", offsetFallbackId=" + settings.offsetFallbackId + ", prefetch=" + settings.prefetch
        + ", maxDeferredCommits=" + settings.maxDeferredCommits + ", commitInterval=" + settings.commitInterval
        + ", commitBatchSize=" + settings.commitBatchSize + ", revocationGracePeriod=" + settings.revocationGracePeriod
        + ", closeTimeout=" + settings.closeTimeout + ", deadLetterTopic=" + settings.deadLetterTopicDescription
        + ", reconnectBackoff=" + settings.reconnectBackoff + ".." + settings.reconnectMaxBackoff
        + ", heldCommitsLogInterval=" + settings.heldCommitsLogInterval
        + ", consumerProperties=" + Secrets.mask(settings.consumerProperties)
        + ", producerProperties=" + Secrets.mask(settings.producerProperties)
        + ", meterRegistry=" + (settings.meterRegistry != null) + ", engine=" + settings.engine + "]";
  }

  /**
   * Configures {@link KafkaSourceOptions}. Not thread-safe.
   *
   * @param <T> the payload type
   */
  public static final class Builder<T> {
    private @Nullable String bootstrapServers;
    private @Nullable String groupId;
    private final List<String> topics;
    private @Nullable Deserializer<T> valueDeserializer;
    private String messageIdHeader = DEFAULT_MESSAGE_ID_HEADER;
    private @Nullable MessageIdExtractor<T> messageIdExtractor;
    private boolean offsetFallbackId = true;
    private int prefetch = DEFAULT_PREFETCH;
    private int maxDeferredCommits = DEFAULT_MAX_DEFERRED_COMMITS;
    private Duration commitInterval = DEFAULT_COMMIT_INTERVAL;
    private int commitBatchSize = DEFAULT_COMMIT_BATCH_SIZE;
    private Duration revocationGracePeriod = DEFAULT_REVOCATION_GRACE_PERIOD;
    private Duration closeTimeout = DEFAULT_CLOSE_TIMEOUT;
    private UnaryOperator<String> deadLetterTopic = topic -> topic + DEFAULT_DEAD_LETTER_SUFFIX;
    private String deadLetterTopicDescription = "<topic>" + DEFAULT_DEAD_LETTER_SUFFIX;
    private Duration reconnectBackoff = DEFAULT_RECONNECT_BACKOFF;
    private Duration reconnectMaxBackoff = DEFAULT_RECONNECT_MAX_BACKOFF;
    private Duration heldCommitsLogInterval = DEFAULT_HELD_COMMITS_LOG_INTERVAL;
    private KafkaEngine engine = DEFAULT_ENGINE;
    private final Map<String, Object> consumerProperties;
    private final Map<String, Object> producerProperties;
    private @Nullable Object meterRegistry;

    private Builder() {
      topics = new ArrayList<>();
      consumerProperties = new LinkedHashMap<>();
      producerProperties = new LinkedHashMap<>();
    }

    /** A copy whose lists and maps cannot change: the options' settings. */
    private Builder(Builder<T> b) {
      bootstrapServers = b.bootstrapServers;
      groupId = b.groupId;
      topics = List.copyOf(b.topics);
      valueDeserializer = b.valueDeserializer;
      messageIdHeader = b.messageIdHeader;
      messageIdExtractor = b.messageIdExtractor;
      offsetFallbackId = b.offsetFallbackId;
      prefetch = b.prefetch;
      maxDeferredCommits = b.maxDeferredCommits;
      commitInterval = b.commitInterval;
      commitBatchSize = b.commitBatchSize;
      revocationGracePeriod = b.revocationGracePeriod;
      closeTimeout = b.closeTimeout;
      deadLetterTopic = b.deadLetterTopic;
      deadLetterTopicDescription = b.deadLetterTopicDescription;
      reconnectBackoff = b.reconnectBackoff;
      reconnectMaxBackoff = b.reconnectMaxBackoff;
      heldCommitsLogInterval = b.heldCommitsLogInterval;
      engine = b.engine;
      consumerProperties = Collections.unmodifiableMap(new LinkedHashMap<>(b.consumerProperties));
      producerProperties = Collections.unmodifiableMap(new LinkedHashMap<>(b.producerProperties));
      meterRegistry = b.meterRegistry;
    }

    /**
     * The Kafka cluster, as in {@code bootstrap.servers}. Required.
     *
     * @param bootstrapServers comma-separated {@code host:port} pairs
     * @return this builder
     */
    public Builder<T> bootstrapServers(String bootstrapServers) {
      this.bootstrapServers = requireText(bootstrapServers, "bootstrapServers");
      return this;
    }

    /**
     * The consumer group whose committed offsets record progress. Required.
     *
     * @param groupId the {@code group.id}
     * @return this builder
     */
    public Builder<T> groupId(String groupId) {
      this.groupId = requireText(groupId, "groupId");
      return this;
    }

    /**
     * The topics to subscribe to. Required: at least one.
     *
     * @param topics topic names
     * @return this builder
     */
    public Builder<T> topics(String... topics) {
      Objects.requireNonNull(topics, "topics");
      for (String topic : topics) {
        this.topics.add(requireText(topic, "topics"));
      }
      return this;
    }

    /**
     * Decodes record values. Required. A value it cannot decode becomes a delivery with
     * {@link dev.idem.Delivery#decodingFailure()} set, which the pipeline dead-letters as
     * {@link dev.idem.DeadLetterReason#UNDECODABLE_PAYLOAD} with the error's class and message;
     * the stream goes on. That holds for anything it throws, JVM errors included
     * ({@code AssertionError}, {@code StackOverflowError}, {@code OutOfMemoryError},
     * {@code LinkageError}): it runs in the source, not in the Kafka client, and an
     * {@code Error} is also logged at WARN.
     *
     * @param valueDeserializer the deserializer; it is not configured or closed by the source
     * @return this builder
     */
    public Builder<T> valueDeserializer(Deserializer<T> valueDeserializer) {
      this.valueDeserializer = Objects.requireNonNull(valueDeserializer, "valueDeserializer");
      return this;
    }

    /**
     * The header that carries the message id (UTF-8). Default
     * {@value KafkaSourceOptions#DEFAULT_MESSAGE_ID_HEADER}. Dead letters carry the id in this
     * header too, so replayed records keep their id.
     *
     * <p>The header is decoded strictly: bytes that are not UTF-8 are not replaced (which would
     * make {@code FF 41} and {@code FE 41} the same id, and the second message a false
     * duplicate) but make the id invalid: {@link dev.idem.Delivery#id()} throws an
     * {@link IllegalArgumentException} and the record is dead-lettered as
     * {@link dev.idem.DeadLetterReason#INVALID_ID}, its headers kept byte for byte.
     *
     * <p>A record with the header more than once is accepted only when every copy holds the same
     * bytes (that is one id). Different values are rejected as
     * {@link dev.idem.DeadLetterReason#INVALID_ID} too, rather than letting the last one win:
     * producers that disagree on a message's id are a bug, and picking either id could apply a
     * payment twice or skip one as a duplicate.
     *
     * @param header the header name
     * @return this builder
     */
    public Builder<T> messageIdHeader(String header) {
      this.messageIdHeader = requireText(header, "messageIdHeader");
      return this;
    }

    /**
     * Derives the id from the record instead of the header, for example a domain key. Default:
     * none (the header is used).
     *
     * @param extractor the extractor
     * @return this builder
     */
    public Builder<T> messageIdExtractor(MessageIdExtractor<T> extractor) {
      this.messageIdExtractor = Objects.requireNonNull(extractor, "messageIdExtractor");
      return this;
    }

    /**
     * Whether a record without an id (no header, or the extractor returned none) gets the id
     * {@code topic/partition/offset}. Default {@code true}.
     *
     * <p>That id deduplicates redeliveries of the same record by the broker (after a crash or a
     * rebalance) but <b>not</b> producer duplicates: the same event published twice has two
     * offsets and is applied twice. Use a producer-supplied id for those. With {@code false},
     * such records are dead-lettered as {@link dev.idem.DeadLetterReason#MISSING_ID}.
     *
     * @param enabled whether to fall back
     * @return this builder
     */
    public Builder<T> offsetFallbackId(boolean enabled) {
      this.offsetFallbackId = enabled;
      return this;
    }

    /**
     * Records fetched per poll ({@code max.poll.records}) and buffered ahead of the pipeline.
     * The source buffers at most about twice this many records; when the pipeline has no demand,
     * the consumer pauses its partitions and keeps polling, so it stays in the group however
     * slow the handler. Default {@value KafkaSourceOptions#DEFAULT_PREFETCH}; core's
     * {@code prefetch} adds its own buffer on top.
     *
     * @param prefetch at least 1
     * @return this builder
     */
    public Builder<T> prefetch(int prefetch) {
      this.prefetch = prefetch;
      return this;
    }

    /**
     * How many settled records may wait for an unsettled earlier record of their partition
     * before the consumer pauses. Offsets are committed only up to the first unsettled record,
     * so this bounds the work redone after a crash behind one slow message. Default
     * {@value KafkaSourceOptions#DEFAULT_MAX_DEFERRED_COMMITS}.
     *
     * @param maxDeferredCommits at least 1
     * @return this builder
     */
    public Builder<T> maxDeferredCommits(int maxDeferredCommits) {
      this.maxDeferredCommits = maxDeferredCommits;
      return this;
    }

    /**
     * The longest time a committable offset waits before it is committed. Shorter means less
     * redelivery after a crash and more commit requests. Default 1 s.
     *
     * @param interval positive
     * @return this builder
     */
    public Builder<T> commitInterval(Duration interval) {
      this.commitInterval = requirePositive(interval, "commitInterval");
      return this;
    }

    /**
     * Settled records that trigger a commit before the interval ends; 0 commits on the interval
     * only. Default {@value KafkaSourceOptions#DEFAULT_COMMIT_BATCH_SIZE}.
     *
     * @param size at least 0
     * @return this builder
     */
    public Builder<T> commitBatchSize(int size) {
      this.commitBatchSize = size;
      return this;
    }

    /**
     * When partitions are revoked, how long the rebalance waits for records in flight to settle
     * and their offsets to commit. Settlements after that are ignored for the revoked
     * partitions (they never commit for the new owner), and the new owner's redeliveries are
     * absorbed by the dedup table. Must be shorter than {@code max.poll.interval.ms}.
     * Default 10 s.
     *
     * @param gracePeriod zero or positive
     * @return this builder
     */
    public Builder<T> revocationGracePeriod(Duration gracePeriod) {
      Objects.requireNonNull(gracePeriod, "revocationGracePeriod");
      if (gracePeriod.isNegative()) {
        throw new IllegalArgumentException("revocationGracePeriod must not be negative, was " + gracePeriod);
      }
      this.revocationGracePeriod = gracePeriod;
      return this;
    }

    /**
     * How long cancelling the stream may take to commit settled offsets and close the consumer.
     * Default 10 s.
     *
     * @param timeout positive
     * @return this builder
     */
    public Builder<T> closeTimeout(Duration timeout) {
      this.closeTimeout = requirePositive(timeout, "closeTimeout");
      return this;
    }

    /**
     * Dead letters of topic {@code t} go to {@code t + suffix}. Default
     * {@value KafkaSourceOptions#DEFAULT_DEAD_LETTER_SUFFIX}.
     *
     * @param suffix the suffix
     * @return this builder
     */
    public Builder<T> deadLetterTopicSuffix(String suffix) {
      String s = requireText(suffix, "deadLetterTopicSuffix");
      this.deadLetterTopic = topic -> topic + s;
      this.deadLetterTopicDescription = "<topic>" + s;
      return this;
    }

    /**
     * Names the dead-letter topic of each source topic.
     *
     * @param naming maps a source topic to its dead-letter topic
     * @return this builder
     */
    public Builder<T> deadLetterTopic(UnaryOperator<String> naming) {
      this.deadLetterTopic = Objects.requireNonNull(naming, "deadLetterTopic");
      this.deadLetterTopicDescription = "custom";
      return this;
    }

    /**
     * Backoff between recreations of the consumer after a fatal consumer error (for example a
     * commit that failed for good while the broker was away). Defaults 1 s to 30 s.
     *
     * @param first the first wait
     * @param max the longest wait
     * @return this builder
     */
    public Builder<T> reconnectBackoff(Duration first, Duration max) {
      this.reconnectBackoff = requirePositive(first, "reconnectBackoff first");
      this.reconnectMaxBackoff = requirePositive(max, "reconnectBackoff max");
      return this;
    }

    /**
     * How often a partition whose commits are held is logged again at ERROR. A record whose dead
     * letter failed for good (a record too large for the dead-letter topic's
     * {@code max.message.bytes}, a producer not authorised to write the topic; retriable errors
     * are retried instead) stays unsettled: it is logged at ERROR at once, with its
     * topic-partition, offset, message id and the error, the settlement fails, and its partition
     * commits nothing from that offset on, so nothing is lost: the record is redelivered after a
     * restart or a rebalance. While that lasts, the partition, offset, message id and how long
     * are logged at ERROR again every interval, and the meters
     * {@value KafkaSource#FAILED_DEAD_LETTERS_METRIC} and
     * {@value KafkaSource#HELD_PARTITIONS_METRIC} (with a {@link #meterRegistry registry}) count
     * it. Records after it are still processed, until {@link #maxDeferredCommits} of them wait
     * and the consumer pauses. Default 60 s.
     *
     * @param interval positive
     * @return this builder
     */
    public Builder<T> heldCommitsLogInterval(Duration interval) {
      this.heldCommitsLogInterval = requirePositive(interval, "heldCommitsLogInterval");
      return this;
    }

    /**
     * An extra Kafka consumer property (security settings, timeouts). The source owns
     * {@code enable.auto.commit} (false), the deserializers, {@code group.id}, {@code bootstrap.servers}
     * and {@code max.poll.records} (see {@link #prefetch}); setting those here fails in {@link #build()}.
     *
     * @param name the property name
     * @param value its value
     * @return this builder
     */
    public Builder<T> consumerProperty(String name, Object value) {
      consumerProperties.put(requireText(name, "consumerProperty name"), Objects.requireNonNull(value, "consumerProperty value"));
      return this;
    }

    /**
     * An extra property of the dead-letter producer (security settings, timeouts). The source
     * owns {@code acks} (all), {@code enable.idempotence} (true) and the serializers.
     *
     * @param name the property name
     * @param value its value
     * @return this builder
     */
    public Builder<T> producerProperty(String name, Object value) {
      producerProperties.put(requireText(name, "producerProperty name"), Objects.requireNonNull(value, "producerProperty value"));
      return this;
    }

    /**
     * Publishes the Kafka consumer's and dead-letter producer's client metrics to Micrometer
     * (Micrometer's {@code KafkaClientMetrics} binder). Default: none. Needs
     * {@code micrometer-core} on the class path.
     *
     * @param registry an {@code io.micrometer.core.instrument.MeterRegistry}
     * @return this builder
     */
    public Builder<T> meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
      this.meterRegistry = Objects.requireNonNull(registry, "meterRegistry");
      return this;
    }

    /**
     * The engine the source runs on. Default {@link KafkaEngine#NATIVE}, which runs on every
     * supported kafka-clients version; {@link KafkaEngine#REACTOR_KAFKA} needs reactor-kafka on
     * the class path and kafka-clients 3.x.
     *
     * @param engine the engine
     * @return this builder
     */
    public Builder<T> engine(KafkaEngine engine) {
      this.engine = Objects.requireNonNull(engine, "engine");
      return this;
    }

    /**
     * Validates the settings and builds the options.
     *
     * @return the options
     * @throws IllegalArgumentException naming the setting that is missing or invalid
     */
    public KafkaSourceOptions<T> build() {
      OptionRules.checkRequired(bootstrapServers, groupId, topics, valueDeserializer);
      return OptionRules.check(new KafkaSourceOptions<>(this));
    }
  }
}
