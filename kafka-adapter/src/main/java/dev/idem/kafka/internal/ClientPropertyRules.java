package dev.idem.kafka.internal;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;

/**
 * What a source's extra Kafka client properties may not change: the settings the source owns
 * (servers, group, deserializers, {@code max.poll.records}, the producer's acks, idempotence and
 * serializers), auto-commit (offsets are committed only after settlement), and a
 * {@code max.poll.interval.ms} no longer than the revocation grace period.
 */
public final class ClientPropertyRules {

  private static final List<String> CONSUMER_OWNED = List.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
      ConsumerConfig.GROUP_ID_CONFIG, ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
      ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ConsumerConfig.MAX_POLL_RECORDS_CONFIG);
  private static final List<String> PRODUCER_OWNED = List.of("acks", "enable.idempotence", "key.serializer",
      "value.serializer", "bootstrap.servers");
  private static final long DEFAULT_MAX_POLL_INTERVAL_MS = 300_000L;

  private ClientPropertyRules() {}

  /**
   * Checks the extra client properties of a source.
   *
   * @param consumer the extra consumer properties
   * @param producer the extra producer properties (the dead-letter producer's)
   * @param revocationGracePeriod the source's revocation grace period
   * @throws IllegalArgumentException naming the property that breaks a rule
   */
  public static void check(Map<String, Object> consumer, Map<String, Object> producer, Duration revocationGracePeriod) {
    for (String owned : CONSUMER_OWNED) {
      if (consumer.containsKey(owned)) {
        throw new IllegalArgumentException("consumerProperty " + owned + " is set by the source; use the dedicated setting");
      }
    }
    Object autoCommit = consumer.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
    if (autoCommit != null && Boolean.parseBoolean(autoCommit.toString())) {
      throw new IllegalArgumentException("consumerProperty enable.auto.commit must stay false: offsets are committed only after settlement");
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
