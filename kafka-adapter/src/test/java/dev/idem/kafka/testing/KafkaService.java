package dev.idem.kafka.testing;

import dev.idem.testing.Ports;
import dev.idem.testing.PostgresService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Hands tests (and the examples' demo) a real Kafka broker, found in this order:
 * <ol>
 *   <li>the environment variable {@value #BOOTSTRAP_ENV} (bootstrap servers such as
 *       {@code kafka.example:9092});</li>
 *   <li>a broker already listening on {@value #LOCAL_BOOTSTRAP};</li>
 *   <li>a single-node KRaft broker from Kafka's own jars ({@code kafka-broker.version} of the
 *       root pom), started in a separate JVM process ({@link EmbeddedKafkaBroker}); it stops
 *       when this JVM exits. This JVM's kafka-clients can be of any version the broker serves.</li>
 * </ol>
 * When none works, {@link #get()} throws an {@link IllegalStateException} that says how to
 * provide one: tests fail, they never skip.
 */
public final class KafkaService {

  /** Environment variable naming the bootstrap servers of a broker for tests. */
  public static final String BOOTSTRAP_ENV = "IDEM_TEST_KAFKA_BOOTSTRAP";
  /** The local broker tried when the environment variable is unset. */
  public static final String LOCAL_BOOTSTRAP = "127.0.0.1:9092";

  private static volatile KafkaService instance;

  private final String bootstrapServers;
  private final EmbeddedKafkaBroker embedded;
  private final Admin admin;

  private KafkaService(String bootstrapServers, EmbeddedKafkaBroker embedded) {
    this.bootstrapServers = bootstrapServers;
    this.embedded = embedded;
    Map<String, Object> props = new HashMap<>();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    this.admin = Admin.create(props);
  }

  /**
   * The shared service, located (or started) on first use.
   *
   * @return the service
   * @throws IllegalStateException with instructions when no broker can be found or started
   */
  public static KafkaService get() {
    KafkaService s = instance;
    if (s == null) {
      synchronized (KafkaService.class) {
        if (instance == null) {
          instance = locate();
          instance.awaitReady();
        }
        s = instance;
      }
    }
    return s;
  }

  private static KafkaService locate() {
    String fromEnv = System.getenv(BOOTSTRAP_ENV);
    if (fromEnv != null && !fromEnv.isBlank()) {
      return new KafkaService(fromEnv, null);
    }
    if (Ports.listening("127.0.0.1", 9092)) {
      return new KafkaService(LOCAL_BOOTSTRAP, null);
    }
    EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.create();
    try {
      broker.start();
      return new KafkaService(broker.bootstrapServers(), broker);
    } catch (RuntimeException e) {
      broker.destroy();
      throw new IllegalStateException("No Kafka broker for the tests, and the KRaft broker process did not start. "
          + "Provide one of: (1) the environment variable " + BOOTSTRAP_ENV
          + " with bootstrap servers, e.g. localhost:9092; (2) a KRaft broker on 127.0.0.1:9092, e.g. "
          + "bin/kafka-storage.sh format --standalone -t $(bin/kafka-storage.sh random-uuid) -c config/server.properties "
          + "&& bin/kafka-server-start.sh config/server.properties; (3) the broker process's class path, built by "
          + "'mvn -pl test-kafka-broker compile' (the cause below says what went wrong).", e);
    }
  }

  private void awaitReady() {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    Exception last = null;
    while (System.nanoTime() < deadline) {
      try {
        if (!admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).isEmpty()) {
          return;
        }
      } catch (Exception e) {
        last = e;
      }
    }
    throw new IllegalStateException("Kafka at " + bootstrapServers + " did not answer within 60 s", last);
  }

  /**
   * The bootstrap servers.
   *
   * @return {@code host:port} pairs
   */
  public String bootstrapServers() {
    return bootstrapServers;
  }

  /**
   * The broker process, when this service started one.
   *
   * @return the broker, or {@code null} for an external broker
   */
  public EmbeddedKafkaBroker embeddedBroker() {
    return embedded;
  }

  /**
   * The shared admin client; do not close it.
   *
   * @return the admin client
   */
  public Admin admin() {
    return admin;
  }

  /**
   * A name no other test uses, valid for topics, groups, consumers and tables.
   *
   * @param prefix letters, digits and underscores
   * @return the unique name
   */
  public static String uniqueName(String prefix) {
    return PostgresService.uniqueName(prefix);
  }

  /**
   * Creates a topic with replication factor 1 and waits until it exists.
   *
   * @param topic the name
   * @param partitions the partition count
   */
  public void createTopic(String topic, int partitions) {
    createTopic(topic, partitions, Map.of());
  }

  /**
   * Creates a topic with replication factor 1 and topic configs, and waits until it exists.
   *
   * @param topic the name
   * @param partitions the partition count
   * @param configs topic configs such as {@code max.message.bytes}
   */
  public void createTopic(String topic, int partitions, Map<String, String> configs) {
    try {
      admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("Could not create topic " + topic, e);
    }
  }

  /**
   * Sets one config of a topic and waits until the broker accepted it.
   *
   * @param topic the topic
   * @param name the config name, such as {@code max.message.bytes}
   * @param value its new value
   */
  public void setTopicConfig(String topic, String name, String value) {
    try {
      admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic),
          List.of(new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET)))).all().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("Could not set " + name + " of topic " + topic, e);
    }
  }

  /**
   * Reads every record of a topic up to its current end, raw (key, value and header bytes).
   *
   * @param topic the topic
   * @return the records, partition by partition in offset order
   */
  public List<ConsumerRecord<byte[], byte[]>> readAll(String topic) {
    Map<Integer, Long> end = endOffsets(topic);
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      long deadline = System.nanoTime() + timeout().toNanos();
      for (Map.Entry<Integer, Long> e : new TreeMap<>(end).entrySet()) {
        TopicPartition tp = new TopicPartition(topic, e.getKey());
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
        while (consumer.position(tp) < e.getValue()) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("Reading " + tp + " did not reach offset " + e.getValue() + " within " + timeout());
          }
          consumer.poll(Duration.ofMillis(200)).records(tp).stream().filter(r -> r.offset() < e.getValue()).forEach(records::add);
        }
      }
    }
    return records;
  }

  /**
   * The committed offsets of a group on a topic, from {@code listConsumerGroupOffsets}.
   *
   * @param groupId the group
   * @param topic the topic
   * @return partition number to committed offset; partitions without a commit are absent
   */
  public Map<Integer, Long> committedOffsets(String groupId, String topic) {
    try {
      Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(groupId)
          .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
      return offsets.entrySet().stream()
          .filter(e -> e.getKey().topic().equals(topic) && e.getValue() != null)
          .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset()));
    } catch (Exception e) {
      throw new IllegalStateException("Could not list the offsets of group " + groupId, e);
    }
  }

  /**
   * The partitions of a topic that each member of a consumer group owns, as the group
   * coordinator sees it ({@code describeConsumerGroups}): it changes when a rebalance completes,
   * so a member listed with partitions here has been given them.
   *
   * @param groupId the group
   * @param topic the topic
   * @return member id to its partition numbers (empty for a member without partitions); no entry
   *     for a group without members
   */
  public Map<String, Set<Integer>> assignments(String groupId, String topic) {
    try {
      ConsumerGroupDescription group = admin.describeConsumerGroups(List.of(groupId)).describedGroups().get(groupId)
          .get(30, TimeUnit.SECONDS);
      return group.members().stream().collect(Collectors.toMap(MemberDescription::consumerId,
          m -> m.assignment().topicPartitions().stream().filter(tp -> tp.topic().equals(topic))
              .map(TopicPartition::partition).collect(Collectors.toSet())));
    } catch (Exception e) {
      throw new IllegalStateException("Could not describe group " + groupId, e);
    }
  }

  /**
   * The end (log-end) offsets of every partition of a topic.
   *
   * @param topic the topic
   * @return partition number to end offset
   */
  public Map<Integer, Long> endOffsets(String topic) {
    try {
      int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
          .get(topic).partitions().size();
      Map<TopicPartition, OffsetSpec> request = new HashMap<>();
      for (int p = 0; p < partitions; p++) {
        request.put(new TopicPartition(topic, p), OffsetSpec.latest());
      }
      Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = admin.listOffsets(request).all().get(30,
          TimeUnit.SECONDS);
      return result.entrySet().stream().collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset()));
    } catch (Exception e) {
      throw new IllegalStateException("Could not list the end offsets of " + topic, e);
    }
  }

  /**
   * A new idempotent {@code acks=all} producer of byte values; the caller closes it.
   *
   * @return the producer
   */
  public KafkaProducer<byte[], byte[]> producer() {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    return new KafkaProducer<>(props);
  }

  /**
   * A record with a string key, value and message id header (any may be {@code null}).
   *
   * @param topic the topic
   * @param partition the partition, or {@code null} to partition by key
   * @param key the key
   * @param messageId the {@code message-id} header value
   * @param value the value
   * @return the record
   */
  public static ProducerRecord<byte[], byte[]> record(String topic, Integer partition, String key, String messageId,
      String value) {
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, partition,
        key == null ? null : key.getBytes(StandardCharsets.UTF_8),
        value == null ? null : value.getBytes(StandardCharsets.UTF_8));
    if (messageId != null) {
      record.headers().add("message-id", messageId.getBytes(StandardCharsets.UTF_8));
    }
    return record;
  }

  /**
   * Sends records and waits until the broker acknowledged all of them.
   *
   * @param records the records
   */
  public void sendAll(List<ProducerRecord<byte[], byte[]>> records) {
    try (KafkaProducer<byte[], byte[]> producer = producer()) {
      List<java.util.concurrent.Future<?>> futures = records.stream().<java.util.concurrent.Future<?>>map(producer::send)
          .toList();
      producer.flush();
      for (java.util.concurrent.Future<?> f : futures) {
        f.get(60, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("Could not publish test records", e);
    }
  }

  /**
   * Waits at most this long for broker operations in tests.
   *
   * @return the timeout
   */
  public static Duration timeout() {
    return Duration.ofSeconds(120);
  }
}
