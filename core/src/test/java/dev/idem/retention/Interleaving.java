package dev.idem.retention;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One logical clock for the consumer's transactions and the cleanup's batches and runs, to
 * check how they interleave without looking at how long anything took.
 */
final class Interleaving implements RetentionMetrics {
  private final AtomicLong clock = new AtomicLong();
  private final Map<String, Long> started = new ConcurrentHashMap<>();
  private final List<long[]> transactions = new CopyOnWriteArrayList<>(); // {started, committed}
  private final List<Long> batches = new CopyOnWriteArrayList<>();
  private final List<Long> runs = new CopyOnWriteArrayList<>();
  private final List<Long> skippedRuns = new CopyOnWriteArrayList<>();
  private final AtomicLong largestBatch = new AtomicLong();

  ConsumerMetrics consumerMetrics(ConsumerMetrics timing) {
    return new ConsumerMetrics() {
      @Override
      public void started(Delivery<?> delivery) {
        started.put(delivery.id(), clock.incrementAndGet());
      }

      @Override
      public void transaction(Delivery<?> delivery, Duration duration, boolean committed) {
        timing.transaction(delivery, duration, committed);
        if (committed) {
          transactions.add(new long[]{started.getOrDefault(delivery.id(), 0L), clock.incrementAndGet()});
        }
      }
    };
  }

  @Override
  public void batch(String table, long removed, Duration took) {
    largestBatch.accumulateAndGet(removed, Math::max);
    batches.add(clock.incrementAndGet());
  }

  void run(CleanupReport report) {
    long at = clock.incrementAndGet();
    runs.add(at);
    if (report.tables().stream().anyMatch(t -> t.skipped() > 0)) {
      skippedRuns.add(at);
    }
  }

  List<Long> batches() {
    return List.copyOf(batches);
  }

  List<Long> runs() {
    return List.copyOf(runs);
  }

  List<Long> skippedRuns() {
    return List.copyOf(skippedRuns);
  }

  long largestBatch() {
    return largestBatch.get();
  }

  /** The most consecutive batches with no consumer commit between any two of them. */
  int longestStretchWithoutCommit() {
    List<Long> all = batches();
    int longest = 0;
    int current = 0;
    for (int k = 1; k < all.size(); k++) {
      current = commitsBetween(all.get(k - 1), all.get(k)) == 0 ? current + 1 : 0;
      longest = Math.max(longest, current);
    }
    return longest;
  }

  /** Consumer transactions that committed strictly between two events. */
  long commitsBetween(long from, long to) {
    return transactions.stream().filter(t -> t[1] > from && t[1] < to).count();
  }

  /** Consumer transactions (started, committed) that were in flight while more than one of {@code events} happened. */
  List<String> transactionsAcrossMoreThanOne(List<Long> events) {
    return transactions.stream().filter(t -> events.stream().filter(e -> e > t[0] && e < t[1]).count() > 1)
        .map(t -> t[0] + ".." + t[1]).toList();
  }
}
