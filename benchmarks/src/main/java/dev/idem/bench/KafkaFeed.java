package dev.idem.bench;

import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;

/** A row on the shared pre-published topic, read from the beginning by a consumer group of its own. */
final class KafkaFeed implements Feed {

  /** {@code max.poll.records} of the blocking peers: the Kafka client's default. */
  static final int PEER_MAX_POLL_RECORDS = 500;
  /** The share groups' acquisition lock: short, so that the check after a row waits two locks, not a minute. */
  static final Duration SHARE_LOCK = Duration.ofSeconds(5);

  private final KafkaEnv kafka;
  private final String topic;
  private final String group;
  private final KafkaEngine engine;
  private final Duration stall;
  /** Whether this row read the topic as a share group. */
  private boolean share;

  KafkaFeed(KafkaEnv kafka, String topic, String group, KafkaEngine engine, Duration stall) {
    this.kafka = kafka;
    this.topic = topic;
    this.group = group;
    this.engine = engine;
    this.stall = stall;
  }

  private KafkaConsumer<byte[], byte[]> consumer() {
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties());
    consumer.subscribe(List.of(topic));
    return consumer;
  }

  /** The blocking peers' consumer settings (the Spring listener containers' too). */
  private Map<String, Object> consumerProperties() {
    Map<String, Object> props = new HashMap<>();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrap());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // as Idem's source does
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, PEER_MAX_POLL_RECORDS);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    return props;
  }

  private static String id(ConsumerRecord<byte[], byte[]> record) {
    return new String(record.headers().lastHeader("message-id").value(), StandardCharsets.US_ASCII);
  }

  /** Polls until every message settled, failing when nothing arrives for the stall time. */
  private void pollLoop(KafkaConsumer<byte[], byte[]> consumer, Progress progress, PollHandler handler) throws Exception {
    long lastRecord = System.nanoTime();
    while (!progress.isDone()) {
      ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
      if (records.isEmpty()) {
        if (System.nanoTime() - lastRecord > stall.toNanos()) {
          throw new IllegalStateException(
              "stalled: " + progress.settled() + " messages settled, nothing polled for " + stall.toSeconds() + " s");
        }
        continue;
      }
      lastRecord = System.nanoTime();
      progress.received();
      handler.handle(records);
    }
    consumer.commitSync();
  }

  @FunctionalInterface
  private interface PollHandler {
    void handle(ConsumerRecords<byte[], byte[]> records) throws Exception;
  }

  @Override
  public void brokerOnly(Progress progress, Set<String> idsSeen) throws Exception {
    try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
      pollLoop(consumer, progress, records -> {
        for (ConsumerRecord<byte[], byte[]> record : records) {
          Payment.decode(record.value());
          idsSeen.add(id(record));
          progress.settledOne();
        }
        consumer.commitAsync();
      });
    }
  }

  @Override
  public void jdbcPerMessage(Progress progress, Database db, Database.Tables tables) throws Exception {
    try (KafkaConsumer<byte[], byte[]> consumer = consumer();
        Connection c = db.connect();
        PreparedStatement dedup = c
            .prepareStatement("INSERT INTO " + tables.inbox() + " (consumer, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING");
        PreparedStatement credit = c
            .prepareStatement("UPDATE " + tables.accounts() + " SET balance = balance + ? WHERE id = ?")) {
      c.setAutoCommit(false);
      pollLoop(consumer, progress, records -> {
        for (ConsumerRecord<byte[], byte[]> record : records) {
          Payment payment = Payment.decode(record.value());
          dedup.setString(1, "jdbc");
          dedup.setString(2, id(record));
          boolean fresh = dedup.executeUpdate() == 1;
          if (fresh) {
            credit.setLong(1, payment.amountCents());
            credit.setInt(2, payment.account());
            credit.executeUpdate();
          }
          c.commit();
          progress.countEffect(fresh);
          progress.settledOne();
        }
        // Offsets once per poll, after every record's transaction, as Spring Kafka's default AckMode.BATCH does; one
        // commitAsync per record flooded the broker (DisconnectException for minutes) and the row never finished.
        consumer.commitAsync();
      });
    }
  }

  @Override
  public void perPoll(Progress progress, PollWriter writer) throws Exception {
    try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
      pollLoop(consumer, progress, records -> {
        List<String> ids = new ArrayList<>(records.count());
        List<Payment> payments = new ArrayList<>(records.count());
        for (ConsumerRecord<byte[], byte[]> record : records) {
          ids.add(id(record));
          payments.add(Payment.decode(record.value()));
        }
        for (boolean applied : writer.write(ids, payments)) {
          progress.countEffect(applied);
        }
        consumer.commitAsync();
        for (Payment payment : payments) {
          progress.settledOne(payment.publishedNanos());
        }
      });
    }
  }

  @Override
  public void springPerRecord(Progress progress, SpringJdbc jdbc) throws Exception {
    runContainer(progress, (MessageListener<byte[], byte[]>) record -> {
      progress.received();
      progress.countEffect(jdbc.perRecord(id(record), Payment.decode(record.value())));
      progress.settledOne();
    });
  }

  @Override
  public void springPerPoll(Progress progress, SpringJdbc jdbc) throws Exception {
    runContainer(progress, (BatchMessageListener<byte[], byte[]>) records -> {
      progress.received();
      List<String> ids = new ArrayList<>(records.size());
      List<Payment> payments = new ArrayList<>(records.size());
      for (ConsumerRecord<byte[], byte[]> record : records) {
        ids.add(id(record));
        payments.add(Payment.decode(record.value()));
      }
      for (boolean applied : jdbc.perPoll(ids, payments)) {
        progress.countEffect(applied);
      }
      for (int i = 0; i < ids.size(); i++) {
        progress.settledOne();
      }
    });
  }

  @Override
  public void parallelConsumer(Progress progress, Database db, Database.Tables tables, int threads) throws Exception {
    String dedup = "INSERT INTO " + tables.inbox() + " (consumer, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING";
    String credit = "UPDATE " + tables.accounts() + " SET balance = balance + ? WHERE id = ?";
    List<Connection> connections = new CopyOnWriteArrayList<>();
    ThreadLocal<Connection> connection = ThreadLocal.withInitial(() -> {
      try {
        Connection c = db.connect();
        c.setAutoCommit(false);
        connections.add(c);
        return c;
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    });
    ParallelStreamProcessor<byte[], byte[]> processor = ParallelStreamProcessor.createEosStreamProcessor(
        ParallelConsumerOptions.<byte[], byte[]>builder()
            .ordering(ParallelConsumerOptions.ProcessingOrder.KEY)
            .maxConcurrency(threads)
            .commitMode(ParallelConsumerOptions.CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
            .consumer(new KafkaConsumer<>(consumerProperties()))
            .build());
    processor.subscribe(List.of(topic));
    try {
      processor.poll(context -> {
        ConsumerRecord<byte[], byte[]> record = context.getSingleConsumerRecord();
        progress.received();
        Payment payment = Payment.decode(record.value());
        Connection c = connection.get();
        try (PreparedStatement insert = c.prepareStatement(dedup); PreparedStatement update = c.prepareStatement(credit)) {
          insert.setString(1, "pc");
          insert.setString(2, id(record));
          boolean fresh = insert.executeUpdate() == 1;
          if (fresh) {
            update.setLong(1, payment.amountCents());
            update.setInt(2, payment.account());
            update.executeUpdate();
          }
          c.commit();
          progress.countEffect(fresh);
        } catch (SQLException e) {
          throw new IllegalStateException(e);
        }
        progress.settledOne();
      });
      progress.await(stall);
    } finally {
      processor.closeDrainFirst(Duration.ofSeconds(30));
      for (Connection c : connections) {
        c.close();
      }
    }
  }

  /**
   * Spring Kafka's listener container with its defaults (concurrency 1, {@code AckMode.BATCH}: the
   * poll's offsets committed once its records were handled) until every message settled; stopping
   * it commits what is pending.
   */
  private void runContainer(Progress progress, Object listener) throws Exception {
    ContainerProperties properties = new ContainerProperties(topic);
    properties.setMessageListener(listener);
    KafkaMessageListenerContainer<byte[], byte[]> container = new KafkaMessageListenerContainer<>(
        new DefaultKafkaConsumerFactory<>(consumerProperties()), properties);
    container.start();
    try {
      progress.await(stall);
    } finally {
      container.stop();
    }
  }

  @Override
  public Source idemSource(int prefetch) {
    KafkaSource<Payment> source = KafkaSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers(kafka.bootstrap())
        .groupId(group)
        .topics(topic)
        .valueDeserializer(new Payment.KafkaDeserializer())
        .prefetch(prefetch)
        .engine(engine)
        // lanes finish out of partition order: let settled records wait behind a slower one without pausing
        .maxDeferredCommits(Math.max(KafkaSourceOptions.DEFAULT_MAX_DEFERRED_COMMITS, 4 * prefetch))
        .build());
    return new Source(source.receive(), source::close);
  }

  @Override
  public Source shareSource(int prefetch, int consumers) {
    kafka.configureShareGroup(group, SHARE_LOCK);
    share = true;
    KafkaShareSource<Payment> source = KafkaShareSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers(kafka.bootstrap())
        .groupId(group)
        .topics(topic)
        .valueDeserializer(new Payment.KafkaDeserializer())
        .prefetch(prefetch)
        .build(), consumers);
    return new Source(source.receive(), source::close);
  }

  /** A share group has no committed offsets to compare: its check is that nothing is left to hand out after the stop. */
  @Override
  public String settledOnBroker() throws Exception {
    return share ? null : kafka.awaitCommittedToEnd(group, topic, Duration.ofSeconds(30));
  }

  @Override
  public String drainedAfterStop() throws Exception {
    return share
        ? kafka.shareLeftOver(group, topic, SHARE_LOCK.multipliedBy(2).plusSeconds(1))
        : kafka.awaitCommittedToEnd(group, topic, Duration.ofSeconds(10));
  }

  @Override
  public void close() {
    // the group and the shared topic stay; the topic goes at the end of the run
  }
}
