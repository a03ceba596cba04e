package dev.idem.kafka.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Share groups on a test broker (the tests' and the benchmark's): the group's configuration
 * through the Admin client (where a new group starts reading, its acquisition lock) and what the
 * group has left to hand out.
 */
public final class ShareGroups {

  private ShareGroups() {}

  /**
   * Sets group configs, such as {@code share.auto.offset.reset} or {@code share.record.lock.duration.ms}.
   *
   * @param kafka the test broker
   * @param group the share group
   * @param configs the configs
   */
  public static void configure(KafkaService kafka, String group, Map<String, String> configs) {
    configure(kafka.admin(), group, configs);
  }

  /**
   * Sets group configs through an Admin client.
   *
   * @param admin the broker's admin client
   * @param group the share group
   * @param configs the configs
   */
  public static void configure(Admin admin, String group, Map<String, String> configs) {
    // By name: kafka-clients 3.9, which the compatibility matrix compiles this class on, has no GROUP resources
    // (and no share groups: the share suite does not run there).
    ConfigResource resource = new ConfigResource(ConfigResource.Type.valueOf("GROUP"), group);
    List<AlterConfigOp> ops = configs.entrySet().stream()
        .map(e -> new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET)).toList();
    try {
      admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("Could not configure share group " + group + " with " + configs
          + " (share groups need a Kafka 4.2+ broker: the test broker is kafka-broker.version of the root pom)", e);
    }
  }

  /**
   * Whether the kafka-clients on the class path renew acquisition locks ({@code AcknowledgeType.RENEW}, 4.2 and later).
   *
   * @return whether they do
   */
  public static boolean clientRenewsLocks() {
    return java.util.Arrays.stream(AcknowledgeType.values()).anyMatch(type -> type.name().equals("RENEW"));
  }

  /**
   * What the group still has to hand out: a plain share consumer of the group polls for
   * {@code window} and releases whatever it gets. A record that was neither accepted nor rejected
   * comes back when released or when its acquisition lock runs out, so with a window longer than
   * twice the group's lock an empty answer means every record was acknowledged for good.
   *
   * @param kafka the test broker
   * @param group the share group
   * @param topic the topic
   * @param window how long to poll
   * @return the records handed out, as {@code topic-partition@offset}
   */
  public static List<String> leftOver(KafkaService kafka, String group, String topic, Duration window) {
    return leftOver(kafka.bootstrapServers(), group, topic, window);
  }

  /**
   * What the group still has to hand out, on the broker at {@code bootstrapServers}.
   *
   * @param bootstrapServers the broker
   * @param group the share group
   * @param topic the topic
   * @param window how long to poll
   * @return the records handed out, as {@code topic-partition@offset}
   */
  public static List<String> leftOver(String bootstrapServers, String group, String topic, Duration window) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put("share.acknowledgement.mode", "explicit");
    List<String> left = new ArrayList<>();
    try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      long end = System.nanoTime() + window.toNanos();
      while (System.nanoTime() < end) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          left.add(record.topic() + "-" + record.partition() + "@" + record.offset());
          consumer.acknowledge(record, AcknowledgeType.RELEASE);
        }
      }
    }
    return left;
  }
}
