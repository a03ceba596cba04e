package dev.idem.kafka;

import dev.idem.retention.RedeliveryHorizon;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.config.TopicConfig;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The redelivery horizon of Kafka topics for {@code dev.idem.retention.Retention}: a record can
 * be read again (after an offset reset, a replay, a consumer that never committed) for as long as
 * its topic keeps it, its {@code retention.ms}, read with the admin client.
 *
 * <p>The horizon is the longest {@code retention.ms} of the topics. A topic with
 * {@code retention.ms=-1} or {@code cleanup.policy} containing {@code compact} keeps records
 * without a time bound, which makes the horizon unbounded (no window is accepted without the
 * override). Kafka deletes whole segments, so a record can outlive {@code retention.ms} by up to
 * the topic's {@code segment.ms} (and the broker's retention check interval); the description
 * names {@code segment.ms} so that a window close to the bound can take it into account.
 *
 * <p>Each {@link #horizon()} call opens an admin client, reads the configs (within 30 s) and
 * closes it, on a bounded-elastic thread. Immutable.
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

  private Horizon read() throws Exception {
    List<ConfigResource> resources = new ArrayList<>();
    topics.forEach(t -> resources.add(new ConfigResource(ConfigResource.Type.TOPIC, t)));
    Map<ConfigResource, Config> configs;
    try (Admin admin = Admin.create(new HashMap<>(adminProperties))) {
      configs = admin.describeConfigs(resources).all().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    }
    Horizon longest = null;
    for (String topic : topics) {
      Config config = configs.get(new ConfigResource(ConfigResource.Type.TOPIC, topic));
      long retentionMs = Long.parseLong(config.get(TopicConfig.RETENTION_MS_CONFIG).value());
      String policy = config.get(TopicConfig.CLEANUP_POLICY_CONFIG).value();
      String segmentMs = config.get(TopicConfig.SEGMENT_MS_CONFIG).value();
      if (retentionMs < 0 || (policy != null && policy.contains(TopicConfig.CLEANUP_POLICY_COMPACT))) {
        return Horizon.unbounded("topic '" + topic + "' keeps records without a time bound (retention.ms=" + retentionMs
            + ", cleanup.policy=" + policy + ")");
      }
      if (longest == null || retentionMs > longest.duration().toMillis()) {
        longest = Horizon.bounded(Duration.ofMillis(retentionMs), "topic '" + topic + "' retention.ms=" + retentionMs
            + " (records can outlive it by up to segment.ms=" + segmentMs + ")");
      }
    }
    return longest;
  }

  @Override
  public String toString() {
    return "KafkaRedeliveryHorizon" + topics;
  }
}
