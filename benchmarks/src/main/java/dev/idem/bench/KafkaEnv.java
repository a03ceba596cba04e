package dev.idem.bench;

import dev.idem.kafka.testing.EmbeddedKafkaBroker;
import dev.idem.kafka.testing.ShareGroups;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka side: the broker (external, or a KRaft broker from Kafka's own jars in a child JVM, so
 * that the CPU figures are the consumer's alone), topics, publishing, and the offsets the checks read.
 */
final class KafkaEnv implements AutoCloseable {

  private final String bootstrap;
  private final String where;
  private final EmbeddedKafkaBroker broker;
  private final Admin admin;

  private KafkaEnv(String bootstrap, String where, EmbeddedKafkaBroker broker) {
    this.bootstrap = bootstrap;
    this.where = where;
    this.broker = broker;
    Map<String, Object> props = new HashMap<>();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    this.admin = Admin.create(props);
  }

  static KafkaEnv start(Options options) {
    if (options.kafkaBootstrap != null) {
      return ready(new KafkaEnv(options.kafkaBootstrap, "external broker at " + options.kafkaBootstrap, null));
    }
    EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.create(List.of("-Xmx1g", "-XX:+UseG1GC"), List.of());
    try {
      broker.start();
    } catch (RuntimeException e) {
      broker.destroy();
      throw e;
    }
    return ready(new KafkaEnv(broker.bootstrapServers(), "KRaft broker (Kafka " + broker.version() + ") in a child JVM, pid "
        + broker.pid() + "; CPU figures are the consumer's JVM alone", broker));
  }

  private static KafkaEnv ready(KafkaEnv env) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    Exception last = null;
    while (System.nanoTime() < deadline) {
      try {
        if (!env.admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).isEmpty()) {
          return env;
        }
      } catch (Exception e) {
        last = e;
      }
    }
    env.close();
    throw new IllegalStateException("Kafka at " + env.bootstrap + " did not answer within 60 s", last);
  }

  String bootstrap() {
    return bootstrap;
  }

  String where() {
    return where;
  }

  /**
   * Creates the topic and waits until the broker names a leader for every partition: an idempotent
   * producer that writes an instant after the creation can otherwise have its first batches
   * rejected for good (OUT_OF_ORDER_SEQUENCE_NUMBER, retried until the delivery timeout).
   */
  void createTopic(String topic, int partitions) throws Exception {
    admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(60, TimeUnit.SECONDS);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!hasLeaders(topic, partitions)) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "topic " + topic + " has no leader for each of its " + partitions + " partitions after 60 s");
      }
      Thread.sleep(50);
    }
  }

  private boolean hasLeaders(String topic, int partitions) throws Exception {
    try {
      TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
      return description.partitions().size() == partitions
          && description.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty());
    } catch (ExecutionException e) {
      if (e.getCause() instanceof UnknownTopicOrPartitionException) {
        return false;
      }
      throw e;
    }
  }

  void deleteTopic(String topic) {
    try {
      admin.deleteTopics(List.of(topic)).all().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      System.err.println("could not delete topic " + topic + ": " + e);
    }
  }

  /** A producer of the benchmark's records: idempotent, {@code acks=all}. */
  KafkaProducer<byte[], byte[]> producer(int lingerMs) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.LINGER_MS_CONFIG, lingerMs);
    props.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    return new KafkaProducer<>(props);
  }

  /** The record of the workload's message at {@code position}: keyed by account, id in the {@code message-id} header. */
  static ProducerRecord<byte[], byte[]> record(String topic, Workload workload, int position, long publishedNanos) {
    int event = workload.eventAt(position);
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic,
        Integer.toString(workload.account(event)).getBytes(StandardCharsets.US_ASCII),
        workload.payment(event, publishedNanos).encode());
    record.headers().add("message-id", Workload.id(event).getBytes(StandardCharsets.US_ASCII));
    return record;
  }

  /**
   * Publishes the whole workload in order and waits until the broker acknowledged every record.
   * Records whose send failed (they were not written) are sent again by a new producer, at most
   * twice, each time said on the console; the count of records in the topic is checked after.
   */
  void publish(String topic, Workload workload) throws Exception {
    List<Integer> pending = IntStream.range(0, workload.total()).boxed().toList();
    for (int round = 1; !pending.isEmpty(); round++) {
      List<Integer> failed = new CopyOnWriteArrayList<>();
      AtomicReference<Exception> failure = new AtomicReference<>();
      try (KafkaProducer<byte[], byte[]> producer = producer(10)) {
        for (int i : pending) {
          producer.send(record(topic, workload, i, 0), (metadata, error) -> {
            if (error != null) {
              failed.add(i);
              failure.compareAndSet(null, error);
            }
          });
        }
        producer.flush();
      }
      if (!failed.isEmpty()) {
        if (round == 3) {
          throw new IllegalStateException(
              "publishing to " + topic + " failed: " + failed.size() + " records not written after 3 rounds",
              failure.get());
        }
        System.out.printf("[kafka] %d of %d records were not written to %s (%s); sending them again%n", failed.size(),
            pending.size(),
            topic, failure.get());
      }
      pending = failed.stream().sorted().toList();
    }
    long published = endOffsets(topic).values().stream().mapToLong(Long::longValue).sum();
    if (published != workload.total()) {
      throw new IllegalStateException(topic + " holds " + published + " records, expected " + workload.total());
    }
  }

  Map<Integer, Long> endOffsets(String topic) throws Exception {
    int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic).partitions()
        .size();
    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
    for (int p = 0; p < partitions; p++) {
      request.put(new TopicPartition(topic, p), OffsetSpec.latest());
    }
    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = admin.listOffsets(request).all().get(30,
        TimeUnit.SECONDS);
    Map<Integer, Long> offsets = new HashMap<>();
    result.forEach((tp, info) -> offsets.put(tp.partition(), info.offset()));
    return offsets;
  }

  Map<Integer, Long> committedOffsets(String group, String topic) throws Exception {
    Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
        .get(30, TimeUnit.SECONDS);
    Map<Integer, Long> committed = new HashMap<>();
    offsets.forEach((tp, om) -> {
      if (tp.topic().equals(topic) && om != null) {
        committed.put(tp.partition(), om.offset());
      }
    });
    return committed;
  }

  /** Whether the group's committed offsets reach the end of every partition, waiting up to {@code timeout}. */
  String awaitCommittedToEnd(String group, String topic, Duration timeout) throws Exception {
    Map<Integer, Long> end = endOffsets(topic);
    long deadline = System.nanoTime() + timeout.toNanos();
    Map<Integer, Long> committed;
    do {
      committed = committedOffsets(group, topic);
      if (committed.equals(end)) {
        return null;
      }
      Thread.sleep(100);
    } while (System.nanoTime() < deadline);
    return "committed offsets " + committed + ", end offsets " + end;
  }

  /**
   * Configures a share group before its first consumer joins: it reads from the beginning, and
   * holds a record's acquisition lock for {@code lock}.
   */
  void configureShareGroup(String group, Duration lock) {
    ShareGroups.configure(admin, group, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms",
        Long.toString(lock.toMillis())));
  }

  /**
   * What a share group still has to hand out after a row ({@link ShareGroups#leftOver}, polling
   * for {@code window}, longer than twice the group's lock). Null when nothing came, else what did.
   */
  String shareLeftOver(String group, String topic, Duration window) {
    List<String> left = ShareGroups.leftOver(bootstrap, group, topic, window);
    return left.isEmpty()
        ? null
        : left.size() + " records still in share group " + group + " after the row, for example " + left.get(0);
  }

  /**
   * The partitions of {@code topic} assigned to the members of a share group (0 until the first
   * member joined and had its assignment: a share consumer learns it from its heartbeats, 5 s
   * apart by default).
   */
  int shareAssignedPartitions(String group, String topic) throws Exception {
    try {
      return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS).members().stream()
          .mapToInt(m -> (int) m.assignment().topicPartitions().stream().filter(tp -> tp.topic().equals(topic))
              .map(tp -> tp.partition())
              .distinct().count())
          .max().orElse(0);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof org.apache.kafka.common.errors.GroupIdNotFoundException) {
        return 0;
      }
      throw e;
    }
  }

  /** The number of members of a group that have partitions of {@code topic} assigned, and how many partitions. */
  int assignedPartitions(String group, String topic) throws Exception {
    try {
      return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS).members()
          .stream()
          .mapToInt(m -> (int) m.assignment().topicPartitions().stream().filter(tp -> tp.topic().equals(topic)).count()).sum();
    } catch (java.util.concurrent.ExecutionException e) {
      if (e.getCause() instanceof org.apache.kafka.common.errors.GroupIdNotFoundException) {
        return 0; // Kafka 4 answers so until the group's first member joined (a busy machine takes a while)
      }
      throw e;
    }
  }

  /** The pid of the broker this benchmark started, or -1 for an external one. */
  long brokerPid() {
    return broker == null ? -1 : broker.pid();
  }

  @Override
  public void close() {
    admin.close(Duration.ofSeconds(5));
    if (broker != null) {
      broker.destroy();
    }
  }
}
