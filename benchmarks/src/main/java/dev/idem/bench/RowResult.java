package dev.idem.bench;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * One row of the table.
 *
 * @param broker {@code kafka} or {@code rabbit}
 * @param id the row's id, e.g. {@code 4a}
 * @param name what the row runs
 * @param kind which column the row's rate feeds
 * @param messages deliveries settled in the timed window (duplicates included)
 * @param nanos from the first delivery to the last settlement
 * @param cpuNanos the benchmark process's CPU time in that window
 * @param failures what its correctness check found; empty when correct
 * @param batches the micro-batches (one transaction each) an Idem row's lanes formed in the window; -1 for other rows
 * @param brokerCpuNanos the broker process's CPU time over the row (from its start to its stop), -1 when unknown
 * @param settleFrames the frames an Idem row's adapter sent to settle its deliveries (RabbitMQ's {@code basic.ack}), -1 when
 *     not counted
 * @param databaseCpuNanos the local PostgreSQL's CPU time over the row, -1 when unknown
 */
record RowResult(String broker, String id, String name, Kind kind, long messages, long nanos, long cpuNanos,
    List<String> failures,
    long batches, long brokerCpuNanos, long settleFrames, long databaseCpuNanos) {

  /** The peers an Idem row is compared with, and Idem itself. */
  enum Kind {
    /** The database alone: the set-based SQL fed from memory by one JDBC writer, no broker. */
    DATABASE,
    /** The broker's own rate: consume and commit or ack, no database. */
    BROKER,
    /** Idem's adapter alone: deliveries acknowledged at once, no database. */
    ADAPTER,
    /** Blocking JDBC loop, one transaction per message. */
    JDBC_MESSAGE,
    /** Blocking JDBC loop, one transaction per poll. */
    JDBC_POLL,
    /** A Spring listener container, one JDBC transaction per record. */
    SPRING_RECORD,
    /** Confluent's Parallel Consumer, key order, one JDBC transaction per record. */
    PARALLEL_CONSUMER,
    /** Spring Kafka's batch listener, one JDBC transaction per poll. */
    SPRING_POLL,
    /** Hand-written loop on the R2DBC driver, one transaction per poll, one UPDATE per message. */
    R2DBC_MESSAGE,
    /** Hand-written loop on the R2DBC driver, one transaction per poll, one set-based UPDATE. */
    R2DBC_SET,
    /** Idem through the adapter. */
    IDEM
  }

  RowResult {
    failures = List.copyOf(failures);
  }

  RowResult(String broker, String id, String name, Kind kind, long messages, long nanos, long cpuNanos, List<String> failures) {
    this(broker, id, name, kind, messages, nanos, cpuNanos, failures, -1, -1, -1, -1);
  }

  static RowResult failed(String broker, String id, String name, Kind kind, String failure) {
    return new RowResult(broker, id, name, kind, 0, 0, 0, List.of(failure));
  }

  /**
   * Several rounds of one row as one: the round with the median rate (of an even number, the
   * lower of the middle two), its CPU, every round's failures, and each round's rate in the name.
   */
  static RowResult median(List<RowResult> rounds) {
    if (rounds.size() == 1) {
      return rounds.get(0);
    }
    List<RowResult> sorted = new ArrayList<>(rounds);
    sorted.sort(Comparator.comparingDouble(r -> r.ok() ? r.messagesPerSecond() : 0));
    RowResult median = sorted.get((sorted.size() - 1) / 2);
    List<String> failures = new ArrayList<>();
    StringBuilder each = new StringBuilder();
    for (RowResult r : rounds) {
      failures.addAll(r.failures);
      each.append(each.length() == 0 ? "" : " / ")
          .append(r.ok() ? String.format(Locale.ROOT, "%,.0f", r.messagesPerSecond()) : "failed");
    }
    String name = rounds.get(0).name + " [median of " + rounds.size() + " rounds: " + each + " msg/s]";
    return new RowResult(median.broker, median.id, name, median.kind, median.messages, median.nanos, median.cpuNanos, failures,
        median.batches, median.brokerCpuNanos, median.settleFrames, median.databaseCpuNanos);
  }

  boolean ok() {
    return failures.isEmpty();
  }

  double messagesPerSecond() {
    return nanos <= 0 ? 0 : messages / (nanos / 1e9);
  }

  /** Messages per batch (transaction), or -1 when the row does not count its batches. */
  double meanBatch() {
    return batches <= 0 ? -1 : (double) messages / batches;
  }

  /** Batches (transactions) per second, or -1 when the row does not count them. */
  double transactionsPerSecond() {
    return batches <= 0 || nanos <= 0 ? -1 : batches / (nanos / 1e9);
  }

  /** CPU seconds of the broker process per 1,000 messages, or -1 when unknown. */
  double brokerCpuSecondsPerThousand() {
    return brokerCpuNanos < 0 || messages <= 0 ? -1 : brokerCpuNanos / 1e9 / (messages / 1000.0);
  }

  /** CPU seconds of the local PostgreSQL per 1,000 messages, or -1 when unknown. */
  double databaseCpuSecondsPerThousand() {
    return databaseCpuNanos < 0 || messages <= 0 ? -1 : databaseCpuNanos / 1e9 / (messages / 1000.0);
  }

  /** Settle frames (RabbitMQ's {@code basic.ack}) per 1,000 messages, or -1 when not counted. */
  double settleFramesPerThousand() {
    return settleFrames < 0 || messages <= 0 ? -1 : settleFrames / (messages / 1000.0);
  }

  /** CPU seconds of the benchmark process per 1,000 messages. */
  double cpuSecondsPerThousand() {
    return messages <= 0 ? 0 : cpuNanos / 1e9 / (messages / 1000.0);
  }
}
