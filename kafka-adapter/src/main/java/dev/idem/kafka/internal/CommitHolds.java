package dev.idem.kafka.internal;

import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The records of one Kafka consumer whose dead letter failed for good, and so the partitions
 * whose commits they hold: such a record stays unsettled, and the engine commits its
 * partition only up to it. Says so at ERROR when it happens and, through {@link #report()},
 * periodically for as long as it lasts, naming the partition, offset, message id and how long.
 * A hold ends when the record is settled after all, when its partition is revoked (the record is
 * redelivered to the next owner) or when the consumer stops ({@link #close()}).
 */
final class CommitHolds {

  private static final Logger log = LoggerFactory.getLogger(CommitHolds.class);

  private final String source;
  private final Runnable failedCounter;
  private final Map<TopicPartition, TreeMap<Long, Hold>> held = new HashMap<>();
  private boolean closed;

  /** One record whose dead letter failed for good. */
  private record Hold(@Nullable String id, String deadLetterTopic, String error, long sinceNanos) {}

  /**
   * @param source the consumer group, for log lines
   * @param failedCounter counts each record whose dead letter failed for good
   */
  CommitHolds(String source, Runnable failedCounter) {
    this.source = source;
    this.failedCounter = failedCounter;
  }

  /**
   * A record's dead letter failed for good: logs it at ERROR and holds its partition, once per
   * record however often its settlement is retried.
   *
   * @param record the record
   * @param id its message id for logs
   * @param deadLetterTopic where its dead letter went
   * @param error why it failed
   */
  void deadLetterFailed(ConsumerRecord<?, ?> record, @Nullable String id, String deadLetterTopic, Throwable error) {
    TopicPartition tp = new TopicPartition(record.topic(), record.partition());
    String text = String.valueOf(LogText.error(error));
    synchronized (this) {
      if (!closed && held.computeIfAbsent(tp, k -> new TreeMap<>())
          .putIfAbsent(record.offset(), new Hold(id, deadLetterTopic, text, System.nanoTime())) != null) {
        return;
      }
    }
    failedCounter.run();
    log.error(
        "Kafka source '{}': the dead letter of {}@{} (message '{}') failed for good on {} ({}). The record stays unsettled: "
            + "{} commits nothing from offset {} on until the record is redelivered (after a restart or a rebalance) and its "
            + "dead letter is published. Fix the dead-letter topic (its max.message.bytes, the producer's ACLs).",
        source, tp, record.offset(), LogText.id(id), deadLetterTopic, text, tp, record.offset());
  }

  /**
   * A record was settled: if its dead letter had failed before, its hold ends.
   *
   * @param record the record
   */
  void settled(ConsumerRecord<?, ?> record) {
    TopicPartition tp = new TopicPartition(record.topic(), record.partition());
    Hold hold;
    synchronized (this) {
      TreeMap<Long, Hold> holds = held.get(tp);
      hold = holds == null ? null : holds.remove(record.offset());
      if (holds != null && holds.isEmpty()) {
        held.remove(tp);
      }
    }
    if (hold != null) {
      log.info(
          "Kafka source '{}': the dead letter of {}@{} (message '{}') was published on a later attempt; its hold on the commits ends",
          source, tp, record.offset(), LogText.id(hold.id()));
    }
  }

  /**
   * Partitions were revoked: their held records are redelivered to the next owner.
   *
   * @param partitions the revoked partitions
   */
  void revoked(Collection<TopicPartition> partitions) {
    for (TopicPartition tp : partitions) {
      TreeMap<Long, Hold> holds;
      synchronized (this) {
        holds = held.remove(tp);
      }
      if (holds != null) {
        Map.Entry<Long, Hold> first = holds.firstEntry();
        log.warn("Kafka source '{}': {} was revoked while its commits were held at offset {} by message '{}'; the partition's "
            + "next owner receives the record again", source, tp, first.getKey(), LogText.id(first.getValue().id()));
      }
    }
  }

  /** Logs at ERROR, per held partition, the record that holds its commits and for how long. */
  void report() {
    record Line(TopicPartition tp, long offset, Hold hold, int more) {}
    List<Line> lines = new ArrayList<>();
    synchronized (this) {
      held.forEach((tp, holds) -> lines.add(new Line(tp, holds.firstKey(), holds.firstEntry().getValue(), holds.size() - 1)));
    }
    long now = System.nanoTime();
    for (Line line : lines) {
      log.error(
          "Kafka source '{}': the commits of {} are held at offset {} for {} by message '{}', whose dead letter failed for good "
              + "on {} ({}){}. The record is redelivered after a restart or a rebalance; fix the dead-letter topic.",
          source, line.tp(), line.offset(), describe(Duration.ofNanos(now - line.hold().sinceNanos())),
          LogText.id(line.hold().id()),
          line.hold().deadLetterTopic(), line.hold().error(),
          line.more() == 0 ? "" : "; " + line.more() + " more such records after it");
    }
  }

  /**
   * The partitions whose commits are held.
   *
   * @return how many
   */
  synchronized int heldPartitions() {
    return held.size();
  }

  /** The consumer stopped: its records are redelivered to whoever consumes next; nothing is held any more. */
  synchronized void close() {
    closed = true;
    held.clear();
  }

  static String describe(Duration d) {
    if (d.compareTo(Duration.ofSeconds(1)) < 0) {
      return d.toMillis() + " ms";
    }
    if (d.compareTo(Duration.ofMinutes(1)) < 0) {
      return d.toSeconds() + " s";
    }
    return String.format("%dh %02dm %02ds", d.toHours(), d.toMinutesPart(), d.toSecondsPart());
  }
}
