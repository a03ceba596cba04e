package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSourceOptions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.jspecify.annotations.Nullable;

/**
 * What makes {@link KafkaSourceOptions} valid, checked by its builder: the required settings are
 * present, the numbers in range, and the extra Kafka client properties do not change what the
 * source owns (servers, group, deserializers, {@code max.poll.records}, the producer's acks,
 * idempotence and serializers), turn auto-commit on (offsets are committed only after
 * settlement), or make {@code max.poll.interval.ms} shorter than the revocation grace period.
 */
public final class OptionRules {

  private static final List<String> CONSUMER_OWNED = List.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
      ConsumerConfig.GROUP_ID_CONFIG, ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
      ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ConsumerConfig.MAX_POLL_RECORDS_CONFIG);
  private static final List<String> PRODUCER_OWNED = List.of("acks", "enable.idempotence", "key.serializer",
      "value.serializer", "bootstrap.servers");
  private static final long DEFAULT_MAX_POLL_INTERVAL_MS = 300_000L;

  private OptionRules() {}

  /**
   * Checks that a builder has the required settings, before it makes the options.
   *
   * @param bootstrapServers the builder's bootstrap servers, or {@code null}
   * @param groupId the builder's group id, or {@code null}
   * @param topics the builder's topics
   * @param valueDeserializer the builder's value deserializer, or {@code null}
   * @throws IllegalArgumentException naming the setting that is missing
   */
  public static void checkRequired(@Nullable String bootstrapServers, @Nullable String groupId, List<String> topics,
      @Nullable Object valueDeserializer) {
    if (bootstrapServers == null) {
      throw new IllegalArgumentException("bootstrapServers is required (for example \"localhost:9092\")");
    }
    if (groupId == null) {
      throw new IllegalArgumentException("groupId is required");
    }
    if (topics.isEmpty()) {
      throw new IllegalArgumentException("topics is required: name at least one topic");
    }
    if (valueDeserializer == null) {
      throw new IllegalArgumentException("valueDeserializer is required");
    }
  }

  /**
   * Checks the rest of a source's options, once {@link #checkRequired} passed.
   *
   * @param options the options the builder made
   * @param <T> the payload type
   * @return the options
   * @throws IllegalArgumentException naming the setting or property that breaks a rule
   */
  public static <T> KafkaSourceOptions<T> check(KafkaSourceOptions<T> options) {
    if (options.prefetch() < 1) {
      throw new IllegalArgumentException("prefetch must be at least 1, was " + options.prefetch());
    }
    if (options.maxDeferredCommits() < 1) {
      throw new IllegalArgumentException("maxDeferredCommits must be at least 1, was " + options.maxDeferredCommits());
    }
    if (options.commitBatchSize() < 0) {
      throw new IllegalArgumentException("commitBatchSize must not be negative, was " + options.commitBatchSize());
    }
    if (options.reconnectMaxBackoff().compareTo(options.reconnectBackoff()) < 0) {
      throw new IllegalArgumentException("reconnectBackoff max (" + options.reconnectMaxBackoff()
          + ") must not be shorter than first (" + options.reconnectBackoff() + ")");
    }
    checkClientProperties(options.consumerProperties(), options.producerProperties(), options.revocationGracePeriod());
    return options;
  }

  private static void checkClientProperties(Map<String, Object> consumer, Map<String, Object> producer,
      Duration revocationGracePeriod) {
    for (String owned : CONSUMER_OWNED) {
      if (consumer.containsKey(owned)) {
        throw new IllegalArgumentException("consumerProperty " + owned + " is set by the source; use the dedicated setting");
      }
    }
    Object autoCommit = consumer.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
    if (autoCommit != null && Boolean.parseBoolean(autoCommit.toString())) {
      throw new IllegalArgumentException(
          "consumerProperty enable.auto.commit must stay false: offsets are committed only after settlement");
    }
    Object pollInterval = consumer.get(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG);
    long maxPollIntervalMs = pollInterval == null ? DEFAULT_MAX_POLL_INTERVAL_MS : Long.parseLong(pollInterval.toString());
    if (revocationGracePeriod.toMillis() >= maxPollIntervalMs) {
      throw new IllegalArgumentException("revocationGracePeriod (" + revocationGracePeriod
          + ") must be shorter than max.poll.interval.ms (" + maxPollIntervalMs + " ms)");
    }
    for (String owned : PRODUCER_OWNED) {
      if (producer.containsKey(owned)) {
        throw new IllegalArgumentException("producerProperty " + owned + " is set by the source and cannot be changed");
      }
    }
  }
}
