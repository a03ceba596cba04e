package dev.idem.bench;

import dev.idem.Delivery;
import java.util.function.LongSupplier;
import reactor.core.publisher.Flux;

/**
 * One row's view of the broker, with the workload already published and unread: a fresh Kafka
 * consumer group on the shared topic, or a fresh RabbitMQ queue filled for the row. Runs the
 * blocking peers itself and hands out Idem's adapter for the rest.
 */
interface Feed extends AutoCloseable {

  /** The broker alone: consume, commit offsets (Kafka, per poll) or ack (RabbitMQ, per message); no database. */
  void brokerOnly(Progress progress, java.util.Set<String> idsSeen) throws Exception;

  /** One transaction per message: dedup insert, UPDATE, COMMIT; then the ack of that message (RabbitMQ), or the poll's offsets once its records are done (Kafka). */
  void jdbcPerMessage(Progress progress, Database db, Database.Tables tables) throws Exception;

  /** One transaction per poll, written by {@code writer} (JDBC or R2DBC), then the poll's offsets committed or its messages acked. */
  void perPoll(Progress progress, PollWriter writer) throws Exception;

  /**
   * The listener container a Spring team runs (Spring Kafka's or Spring AMQP's, default concurrency
   * 1, offsets committed per poll or each message acked after its listener returned) with a JDBC
   * transaction per record.
   */
  void springPerRecord(Progress progress, SpringJdbc jdbc) throws Exception;

  /** Spring Kafka's batch listener, one JDBC transaction per poll (Kafka only). */
  default void springPerPoll(Progress progress, SpringJdbc jdbc) throws Exception {
    throw new UnsupportedOperationException("Spring AMQP has no batch listener of polls");
  }

  /**
   * Confluent's Parallel Consumer (Kafka only): key order, {@code threads} at once, a JDBC
   * transaction per record on each thread's own connection.
   */
  default void parallelConsumer(Progress progress, Database db, Database.Tables tables, int threads) throws Exception {
    throw new UnsupportedOperationException("Parallel Consumer reads Kafka");
  }

  /** Idem's adapter for this row: KafkaSource or RabbitSource. */
  Source idemSource(int prefetch);

  /**
   * Idem's share-group adapter for this row (Kafka only): {@code KafkaShareSource} with
   * {@code consumers} share consumers on the row's group, which then reads the topic as a share
   * group and not a consumer group.
   */
  default Source shareSource(int prefetch, int consumers) {
    throw new UnsupportedOperationException("share groups are Kafka's");
  }

  /**
   * Called when every message settled, before the consumer stops: null when the broker agrees
   * (Kafka: the group's committed offsets reach the end), else what it saw.
   */
  String settledOnBroker() throws Exception;

  /** Called after the consumer stopped: null when nothing is left for it (RabbitMQ: the queue is empty), else what is. */
  String drainedAfterStop() throws Exception;

  /** Drops what the row created on the broker. */
  @Override
  void close();

  /**
   * An adapter's deliveries and what releases it.
   *
   * @param deliveries subscribe once
   * @param closer closes the source after the subscription is cancelled
   * @param settleFrames the frames the adapter sent to settle deliveries so far (RabbitMQ's
   *     {@code basic.ack} frames), -1 when it does not count them
   */
  record Source(Flux<Delivery<Payment>> deliveries, Runnable closer, LongSupplier settleFrames) implements AutoCloseable {

    Source(Flux<Delivery<Payment>> deliveries, Runnable closer) {
      this(deliveries, closer, () -> -1);
    }

    @Override
    public void close() {
      closer.run();
    }
  }
}
