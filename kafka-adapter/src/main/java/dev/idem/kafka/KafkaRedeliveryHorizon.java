package dev.idem.kafka;

import dev.idem.retention.RedeliveryHorizon;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The redelivery horizon of Kafka topics for {@code dev.idem.retention.Retention}: a record can
 * be read again (after an offset reset, a replay, a consumer that never committed) for as long as
 * its topic keeps it, read with the admin client from the topic's {@code retention.ms},
 * {@code segment.ms} and {@code cleanup.policy}.
 *
 * <p>A topic keeps a record for up to {@code retention.ms + segment.ms}: Kafka deletes whole
 * segments, a segment once its newest record is older than {@code retention.ms}, and a segment
 * takes new records for up to {@code segment.ms} (of record timestamps) before it rolls, so its
 * first record can outlive {@code retention.ms} by up to {@code segment.ms}. The horizon is the
 * longest {@code retention.ms + segment.ms} of the topics (the values in effect, the broker's
 * defaults where the topic sets none). Not included: the broker's
 * {@code log.retention.check.interval.ms} (5 min by default), how often it looks for expired
 * segments, a broker setting that a topic's configs do not carry; give the window that margin.
 *
 * <p>A topic with {@code retention.ms=-1}, or whose {@code cleanup.policy} contains
 * {@code compact} (also {@code compact,delete}: compaction keeps the latest record of each key and
 * merges segments, so {@code segment.ms} no longer bounds a record's age), keeps records without a
 * time bound, which makes the horizon unbounded (no window is accepted without the override).
 *
 * <p>Each {@link #horizon()} call opens an admin client, reads the configs (within 30 s) and
 * closes it, on a bounded-elastic thread. A topic that does not exist fails the horizon with an
 * {@link IllegalArgumentException} naming it; any other failure to read a topic's configs, with
 * an {@link IllegalStateException} naming the topic and the cause. Immutable.
 */
public final class KafkaRedeliveryHorizon implements RedeliveryHorizon {

  /** Longest time to read the topics' configs: 30 s. */
  public static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final Map<String, Object> adminProperties;
  private final List<String> topics;

  private KafkaRedeliveryHorizon(Map<String, Object> adminProperties, List<String> topics) {
    this.adminProperties = Map.copyOf(adminProperties);
    this.topics = List.copyOf(topics);
  }

  /**
   * The horizon of topics.
   *
   * @param bootstrapServers the Kafka cluster
   * @param topics the consumer's topics, at least one
   * @return the horizon
   */
  public static KafkaRedeliveryHorizon of(String bootstrapServers, String... topics) {
    Objects.requireNonNull(bootstrapServers, "bootstrapServers");
    return of(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers), List.of(topics));
  }

  /**
   * The horizon of topics, with admin client properties (security settings and the like).
   *
   * @param adminProperties admin client properties including {@code bootstrap.servers}
   * @param topics the consumer's topics, at least one
   * @return the horizon
   */
  public static KafkaRedeliveryHorizon of(Map<String, Object> adminProperties, List<String> topics) {
    Objects.requireNonNull(adminProperties, "adminProperties");
    if (topics == null || topics.isEmpty()) {
      throw new IllegalArgumentException("topics must name at least one topic");
    }
    return new KafkaRedeliveryHorizon(adminProperties, topics);
  }

  @Override
  public Mono<Horizon> horizon() {
    return Mono.fromCallable(this::read).subscribeOn(Schedulers.boundedElastic());
  }

  private Horizon read() {
    Map<String, Config> configs = new HashMap<>();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    try (Admin admin = Admin.create(new HashMap<>(adminProperties))) {
      List<ConfigResource> resources = new ArrayList<>();
      topics.forEach(t -> resources.add(new ConfigResource(ConfigResource.Type.TOPIC, t)));
      Map<ConfigResource, KafkaFuture<Config>> futures = admin.describeConfigs(resources).values();
      for (String topic : topics) {
        configs.put(topic, await(topic, futures.get(new ConfigResource(ConfigResource.Type.TOPIC, topic)), deadline));
      }
    }
    Horizon longest = null;
    for (String topic : topics) {
      Config config = Objects.requireNonNull(configs.get(topic), "read above for every topic");
      long retentionMs = Long.parseLong(value(topic, config, TopicConfig.RETENTION_MS_CONFIG));
      long segmentMs = Long.parseLong(value(topic, config, TopicConfig.SEGMENT_MS_CONFIG));
      String policy = value(topic, config, TopicConfig.CLEANUP_POLICY_CONFIG);
      if (retentionMs < 0 || policy.contains(TopicConfig.CLEANUP_POLICY_COMPACT)) {
        return Horizon.unbounded("topic '" + topic + "' keeps records without a time bound (retention.ms=" + retentionMs
            + ", cleanup.policy=" + policy + ")");
      }
      Duration kept = keptFor(retentionMs, segmentMs);
      if (longest == null || kept.compareTo(longest.duration()) > 0) {
        longest = Horizon.bounded(kept, "topic '" + topic + "' retention.ms=" + retentionMs + " + segment.ms=" + segmentMs
            + " (Kafka deletes whole segments, so a record can outlive retention.ms by up to segment.ms)");
      }
    }
    return Objects.requireNonNull(longest, "topics is never empty");
  }

  /** {@code retention.ms + segment.ms}, saturated at the longest duration a {@code long} of ms holds. */
  static Duration keptFor(long retentionMs, long segmentMs) {
    long sum = retentionMs + Math.max(0, segmentMs);
    return Duration.ofMillis(sum < retentionMs ? Long.MAX_VALUE : sum);
  }

  private static Config await(String topic, @Nullable KafkaFuture<Config> future, long deadline) {
    if (future == null) {
      throw new IllegalStateException(
          "Cannot read the configs of topic '" + topic + "': the admin client returned no answer for it");
    }
    try {
      return future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause() == null ? e : e.getCause();
      if (cause instanceof UnknownTopicOrPartitionException) {
        throw new IllegalArgumentException("topic '" + topic + "' does not exist (" + cause.getClass().getSimpleName()
            + "), so its retention.ms, segment.ms and cleanup.policy cannot be read for the retention window check; "
            + "create the topic first, or name only the consumer's topics in KafkaRedeliveryHorizon.of", cause);
      }
      throw new IllegalStateException(
          "Cannot read the configs of topic '" + topic + "' (retention.ms, segment.ms, cleanup.policy): "
              + cause.getClass().getSimpleName() + ": " + cause.getMessage(),
          cause);
    } catch (TimeoutException e) {
      future.cancel(true);
      throw new IllegalStateException(
          "Cannot read the configs of topic '" + topic + "' (retention.ms, segment.ms, cleanup.policy): "
              + "no answer within " + TIMEOUT,
          e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while reading the configs of topic '" + topic + "'", e);
    }
  }

  private static String value(String topic, Config config, String name) {
    ConfigEntry entry = config.get(name);
    if (entry == null || entry.value() == null) {
      throw new IllegalStateException("topic '" + topic + "' has no value for " + name + " in its described configs");
    }
    return entry.value();
  }

  @Override
  public String toString() {
    return "KafkaRedeliveryHorizon" + topics;
  }
}
