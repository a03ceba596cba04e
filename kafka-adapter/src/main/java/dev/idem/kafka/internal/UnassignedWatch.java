package dev.idem.kafka.internal;

import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.PartitionInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Says so when a consumer has no partition for a while: a misspelled or missing topic (with
 * topic auto-creation off), a group whose other members hold every partition, or a broker that
 * cannot be reached look the same from outside, a stream that never delivers. After
 * {@link #DEFAULT_WARNING_AFTER} without partitions, then every 5 minutes while it lasts, a WARN
 * line names the topics, and which of them the cluster does not have. Runs on the polling thread.
 */
final class UnassignedWatch {

  private static final Logger log = LoggerFactory.getLogger(UnassignedWatch.class);

  /** How long a consumer may have no partition before the first WARN line: 30 s. */
  static final Duration DEFAULT_WARNING_AFTER = Duration.ofSeconds(30);
  private static final long REPEAT_NANOS = Duration.ofMinutes(5).toNanos();
  private static final Duration LIST_TIMEOUT = Duration.ofSeconds(5);

  private final String name;
  private final List<String> topics;
  private final long afterNanos;
  private long since = System.nanoTime();
  private long nextWarning;
  private boolean warned;

  UnassignedWatch(String name, List<String> topics, Duration after) {
    this.name = name;
    this.topics = topics;
    this.afterNanos = after.toNanos();
    this.nextWarning = since + afterNanos;
  }

  /**
   * Called once per poll.
   *
   * @param consumer the polling thread's consumer
   * @param none whether it has no partition now
   */
  void check(Consumer<byte[], byte[]> consumer, boolean none) {
    long now = System.nanoTime();
    if (!none) {
      if (warned) {
        log.info("Kafka source '{}' has partitions again", name);
      }
      since = now;
      nextWarning = now + afterNanos;
      warned = false;
      return;
    }
    if (now - nextWarning < 0) {
      return;
    }
    nextWarning = now + REPEAT_NANOS;
    warned = true;
    log.warn("Kafka source '{}' has had no partition of {} for {} s: {}", name, topics, Duration.ofNanos(now - since).toSeconds(),
        diagnose(consumer));
  }

  private String diagnose(Consumer<byte[], byte[]> consumer) {
    try {
      Map<String, List<PartitionInfo>> existing = consumer.listTopics(LIST_TIMEOUT);
      TreeSet<String> missing = new TreeSet<>(topics);
      missing.removeAll(existing.keySet());
      if (!missing.isEmpty()) {
        return "the cluster has no topic " + missing + "; create it (or enable auto-creation), or fix the topic name";
      }
      return "the topics exist, so other members of the group hold their partitions (more consumers than partitions), "
          + "or the group is still rebalancing";
    } catch (RuntimeException e) {
      return "the cluster could not be asked for its topics (" + LogText.error(e) + "); is the broker reachable?";
    }
  }
}
