package dev.idem.bench;

import java.util.ArrayList;
import java.util.List;

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
 */
record RowResult(String broker, String id, String name, Kind kind, long messages, long nanos, long cpuNanos, List<String> failures) {

  /** The peers an Idem row is compared with, and Idem itself. */
  enum Kind {
    /** The broker's own rate: consume and commit or ack, no database. */
    BROKER,
    /** Idem's adapter alone: deliveries acknowledged at once, no database. */
    ADAPTER,
    /** Blocking JDBC loop, one transaction per message. */
    JDBC_MESSAGE,
    /** Blocking JDBC loop, one transaction per poll. */
    JDBC_POLL,
    /** Idem through the adapter. */
    IDEM
  }

  RowResult {
    failures = List.copyOf(failures);
  }

  static RowResult failed(String broker, String id, String name, Kind kind, String failure) {
    return new RowResult(broker, id, name, kind, 0, 0, 0, List.of(failure));
  }

  /**
   * Several runs of one row (rounds) as one: their messages over their summed time, their CPU over
   * their messages, every failure.
   */
  static RowResult combined(List<RowResult> runs) {
    RowResult first = runs.get(0);
    if (runs.size() == 1) {
      return first;
    }
    long messages = 0;
    long nanos = 0;
    long cpu = 0;
    List<String> failures = new ArrayList<>();
    for (RowResult r : runs) {
      messages += r.messages;
      nanos += r.nanos;
      cpu += r.cpuNanos;
      failures.addAll(r.failures);
    }
    String name = first.name + " (" + runs.size() + " rounds)";
    return new RowResult(first.broker, first.id, name, first.kind, messages, nanos, cpu, failures);
  }

  boolean ok() {
    return failures.isEmpty();
  }

  double messagesPerSecond() {
    return nanos <= 0 ? 0 : messages / (nanos / 1e9);
  }

  /** CPU seconds of the benchmark process per 1,000 messages. */
  double cpuSecondsPerThousand() {
    return messages <= 0 ? 0 : cpuNanos / 1e9 / (messages / 1000.0);
  }
}
