package dev.idem.kafka.internal;

import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaSourceOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.FluxSink;

/**
 * One Kafka consumer on a thread of its own: the native engine's event loop. Only this thread
 * touches the consumer; other threads request records, settle offsets and ask it to stop.
 *
 * <ul>
 *   <li><b>Backpressure.</b> Records handed out but not yet requested downstream are at most
 *       about one prefetch: beyond that every partition is paused, and polling goes on (so the
 *       group membership stays alive whatever the handler's pace) without fetching. A partition
 *       whose settled records wait behind an unsettled one {@code maxDeferredCommits} times is
 *       paused on its own. A request for more wakes a paused poll at once.</li>
 *   <li><b>Commits.</b> The contiguous settled watermark of each partition
 *       ({@link PartitionOffsets}) is committed asynchronously from this thread every
 *       {@code commitInterval}, or sooner once {@code commitBatchSize} records settled; a failed
 *       commit is asked again next time.</li>
 *   <li><b>Rebalance.</b> Revoked partitions stop being fetched; their records in flight get up to
 *       {@code revocationGracePeriod} to settle, then what settled is committed synchronously before
 *       the revocation completes. Later settlements of their records commit nothing. Lost
 *       partitions commit nothing.</li>
 *   <li><b>Stop.</b> A stop wakes the poll, commits what settled synchronously (up to
 *       {@code closeTimeout}), then closes the consumer (up to {@code closeTimeout}).</li>
 *   <li><b>Errors.</b> An error from the consumer ends the records with that error after the
 *       settled offsets were committed (as far as the broker lets) and the consumer closed.</li>
 * </ul>
 */
final class PollLoop implements Runnable, ConsumerRebalanceListener {

  private static final Logger log = LoggerFactory.getLogger(PollLoop.class);
  private static final Duration POLL_TIMEOUT = Duration.ofMillis(100);
  private static final AtomicInteger THREADS = new AtomicInteger();
  private static final long COMMIT_WARNING_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(30);

  private final KafkaSourceOptions<?> options;
  private final Supplier<Consumer<byte[], byte[]>> consumerFactory;
  private final Function<Consumer<byte[], byte[]>, AutoCloseable> metrics;
  private final CommitHolds holds;
  private final FluxSink<RecordReceiver.Received> sink;
  private final String name;
  private final CompletableFuture<Void> closed = new CompletableFuture<>();
  private final AtomicLong requested = new AtomicLong();
  private final AtomicInteger settledSinceCommit = new AtomicInteger();
  private final Map<TopicPartition, PartitionOffsets> assigned = new HashMap<>();
  private final Set<TopicPartition> paused = new HashSet<>();
  private final long commitIntervalNanos;
  private final UnassignedWatch unassigned;
  private volatile boolean stopping;
  private volatile boolean starved;
  private volatile @Nullable Consumer<byte[], byte[]> consumer;
  private long handedOut;
  /** {@link #handedOut} as of the last poll, for other threads. */
  private volatile long handedOutSnapshot;
  private long lastCommitNanos = System.nanoTime();
  private int failedCommits;
  private long lastCommitWarningNanos;

  PollLoop(KafkaSourceOptions<?> options, Supplier<Consumer<byte[], byte[]>> consumerFactory,
      Function<Consumer<byte[], byte[]>, AutoCloseable> metrics, CommitHolds holds,
      FluxSink<RecordReceiver.Received> sink, Duration unassignedWarningAfter) {
    this.options = options;
    this.consumerFactory = consumerFactory;
    this.metrics = metrics;
    this.holds = holds;
    this.sink = sink;
    this.name = options.groupId();
    this.commitIntervalNanos = options.commitInterval().toNanos();
    this.unassigned = new UnassignedWatch(options.groupId(), options.topics(), unassignedWarningAfter);
  }

  /** Starts the loop's thread. */
  void start() {
    Thread thread = new Thread(this, "idem-kafka-" + name + "-" + THREADS.incrementAndGet());
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * Completes when the consumer is closed.
   *
   * @return the future
   */
  CompletableFuture<Void> closed() {
    return closed;
  }

  /**
   * Downstream asked for {@code n} more records.
   *
   * @param n how many
   */
  void request(long n) {
    long now = requested.accumulateAndGet(n, (a, b) -> a + b < 0 ? Long.MAX_VALUE : a + b);
    // Wake the paused poll only once the records handed out ahead of demand fall below the prefetch
    // (the loop's own test for "full"), not on every request while they are still above it.
    if (starved && handedOutSnapshot - now < options.prefetch()) {
      wakeup();
    }
  }

  /** Stops the loop: commits what settled and closes the consumer, on the loop's thread. */
  void stop() {
    if (!stopping) {
      stopping = true;
      wakeup();
    }
  }

  private void wakeup() {
    Consumer<byte[], byte[]> c = consumer;
    if (c != null) {
      c.wakeup();
    }
  }

  @Override
  public void run() {
    Throwable failure = null;
    AutoCloseable boundMetrics = null;
    Consumer<byte[], byte[]> c = null;
    try {
      c = consumerFactory.get();
      consumer = c;
      boundMetrics = metrics.apply(c);
      if (stopping) {
        c.wakeup();
      }
      c.subscribe(options.topics(), this);
      while (!stopping) {
        applyBackpressure(c);
        unassigned.check(c, assigned.isEmpty());
        ConsumerRecords<byte[], byte[]> records;
        try {
          records = c.poll(POLL_TIMEOUT);
        } catch (WakeupException e) {
          continue;
        }
        handOut(records);
        commitIfDue(c, false);
      }
    } catch (InterruptException e) {
      Thread.interrupted();
      if (!stopping) {
        failure = e;
      }
    } catch (Throwable e) {
      failure = e;
    }
    stopping = true;
    if (c != null) {
      close(c, failure);
    }
    closeQuietly(boundMetrics);
    if (failure != null) {
      sink.error(failure);
    } else {
      sink.complete();
    }
    closed.complete(null);
  }

  private void handOut(ConsumerRecords<byte[], byte[]> records) {
    if (records.isEmpty()) {
      return;
    }
    for (TopicPartition tp : records.partitions()) {
      PartitionOffsets offsets = assigned.get(tp);
      if (offsets == null) {
        continue;
      }
      for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
        long offset = record.offset();
        if (!offsets.continuesWith(offset)) {
          offsets = restart(offsets, offset);
        }
        offsets.handedOut(offset);
        handedOut++;
        PartitionOffsets owner = offsets;
        sink.next(new RecordReceiver.Received(record, () -> settle(owner, offset)));
      }
    }
    handedOutSnapshot = handedOut;
  }

  /**
   * The position of a partition went back: the topic was deleted and recreated before a rebalance
   * told this consumer, or its offsets were reset. The offsets handed out before belong to what
   * was there then; their tracker is closed (their settlements commit nothing) and the partition
   * starts a new one, so that the new records' watermark is committed from where they start.
   */
  private PartitionOffsets restart(PartitionOffsets old, long offset) {
    log.warn("Kafka source '{}': the offsets of {} went back to {} ({}); the topic was recreated or its offsets were reset. "
        + "Commits start again from the new records; records handed out before commit nothing", name, old.partition(), offset,
        old);
    old.close();
    PartitionOffsets fresh = new PartitionOffsets(old.partition());
    assigned.put(old.partition(), fresh);
    return fresh;
  }

  private void settle(PartitionOffsets offsets, long offset) {
    if (offsets.settle(offset)) {
      settledSinceCommit.incrementAndGet();
    }
  }

  private void applyBackpressure(Consumer<byte[], byte[]> c) {
    // Announce "starved" before reading the demand: a request that this read misses then sees the
    // flag and wakes the poll (both are volatile), instead of leaving the partitions paused for a
    // whole poll timeout.
    starved = true;
    long ahead = handedOut - requested.get();
    boolean full = ahead >= options.prefetch();
    List<TopicPartition> pause = new ArrayList<>();
    List<TopicPartition> resume = new ArrayList<>();
    for (PartitionOffsets offsets : assigned.values()) {
      TopicPartition tp = offsets.partition();
      boolean hold = full || offsets.deferred() >= options.maxDeferredCommits();
      if (hold && paused.add(tp)) {
        pause.add(tp);
      } else if (!hold && paused.remove(tp)) {
        resume.add(tp);
      }
    }
    if (!pause.isEmpty()) {
      c.pause(pause);
    }
    if (!resume.isEmpty()) {
      c.resume(resume);
    }
    starved = full;
  }

  private void commitIfDue(Consumer<byte[], byte[]> c, boolean force) {
    long now = System.nanoTime();
    int settled = settledSinceCommit.get();
    int batch = options.commitBatchSize();
    if (!force && now - lastCommitNanos < commitIntervalNanos && (batch == 0 || settled < batch)) {
      return;
    }
    lastCommitNanos = now;
    settledSinceCommit.addAndGet(-settled);
    Map<TopicPartition, OffsetAndMetadata> offsets = toCommit(assigned.values());
    if (offsets.isEmpty()) {
      return;
    }
    Map<TopicPartition, PartitionOffsets> owners = new HashMap<>();
    offsets.keySet().forEach(tp -> owners.put(tp, assigned.get(tp)));
    c.commitAsync(offsets, (committed, error) -> {
      if (error == null) {
        committed
            .forEach((tp, om) -> Objects.requireNonNull(owners.get(tp), "committed only what was asked").committed(om.offset()));
        if (failedCommits > 0) {
          log.info("Kafka source '{}' commits again after {} failed commits", name, failedCommits);
          failedCommits = 0;
        }
      } else if (duringRebalance(error)) {
        // The group is rebalancing: the revocation commits what settled, or the next commit does.
        owners.values().forEach(PartitionOffsets::commitFailed);
        log.debug("Kafka source '{}' could not commit {} during a rebalance; it commits again after it", name, describe(offsets));
      } else {
        owners.values().forEach(PartitionOffsets::commitFailed);
        failedCommits++;
        long now2 = System.nanoTime();
        // While the broker is away every commit fails: one WARN line, then one every 30 s.
        if (failedCommits == 1 || now2 - lastCommitWarningNanos >= COMMIT_WARNING_INTERVAL_NANOS) {
          lastCommitWarningNanos = now2;
          log.warn("Kafka source '{}' could not commit {} ({}; {} failed commits in a row); it tries again with its next "
              + "commit, and nothing is committed that was not settled", name, describe(offsets), LogText.error(error),
              failedCommits);
        }
      }
    });
  }

  private static boolean duringRebalance(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof RebalanceInProgressException) {
        return true;
      }
    }
    return false;
  }

  private static Map<TopicPartition, OffsetAndMetadata> toCommit(Collection<PartitionOffsets> partitions) {
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (PartitionOffsets p : partitions) {
      long offset = p.toCommit();
      if (offset >= 0) {
        offsets.put(p.partition(), new OffsetAndMetadata(offset));
        p.commitRequested(offset);
      }
    }
    return offsets;
  }

  /** Commits synchronously what settled in {@code partitions}; logs and swallows a failure. */
  private void commitSync(Consumer<byte[], byte[]> c, Collection<PartitionOffsets> partitions, String when) {
    Map<TopicPartition, OffsetAndMetadata> offsets = toCommit(partitions);
    if (offsets.isEmpty()) {
      return;
    }
    for (int attempt = 0;; attempt++) {
      try {
        c.commitSync(offsets, options.closeTimeout());
        offsets.forEach(
            (tp, om) -> partitions.stream().filter(p -> p.partition().equals(tp)).forEach(p -> p.committed(om.offset())));
        log.debug("Kafka source '{}' committed {} {}", name, describe(offsets), when);
        return;
      } catch (WakeupException e) {
        if (attempt > 0) {
          throw e;
        }
        // A stop's or a request's wakeup landed here; commit again.
      } catch (InterruptException e) {
        throw e;
      } catch (RuntimeException e) {
        partitions.forEach(PartitionOffsets::commitFailed);
        log.warn("Kafka source '{}' could not commit {} {} ({}); those records are redelivered and found duplicates",
            name, describe(offsets), when, LogText.error(e));
        return;
      }
    }
  }

  @Override
  public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
    for (TopicPartition tp : partitions) {
      assigned.put(tp, new PartitionOffsets(tp));
    }
    if (!partitions.isEmpty()) {
      log.info("Kafka source '{}' assigned {}", name, sorted(partitions));
    }
  }

  @Override
  public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
    if (partitions.isEmpty()) {
      return;
    }
    log.info("Kafka source '{}' revoked {}", name, sorted(partitions));
    List<PartitionOffsets> revoked = new ArrayList<>();
    for (TopicPartition tp : partitions) {
      PartitionOffsets offsets = assigned.get(tp);
      if (offsets != null) {
        revoked.add(offsets);
      }
    }
    if (!stopping) {
      awaitSettled(revoked);
    }
    commitSync(Objects.requireNonNull(consumer, "the consumer's poll calls this"), revoked,
        "before the revocation of their partitions");
    forget(partitions);
  }

  @Override
  public void onPartitionsLost(Collection<TopicPartition> partitions) {
    if (partitions.isEmpty()) {
      return;
    }
    log.warn("Kafka source '{}' lost {} (its group membership ended); their records in flight commit nothing and are "
        + "redelivered to the next owner, which finds the processed ones duplicates", name, sorted(partitions));
    forget(partitions);
  }

  private void forget(Collection<TopicPartition> partitions) {
    for (TopicPartition tp : partitions) {
      PartitionOffsets offsets = assigned.remove(tp);
      if (offsets != null) {
        offsets.close();
      }
      paused.remove(tp);
    }
    holds.revoked(partitions);
  }

  /** Waits up to the revocation grace period until the revoked partitions' records in flight are settled. */
  private void awaitSettled(List<PartitionOffsets> revoked) {
    long deadline = System.nanoTime() + options.revocationGracePeriod().toNanos();
    while (!stopping && revoked.stream().anyMatch(p -> p.unsettled() > 0)) {
      if (System.nanoTime() - deadline >= 0) {
        log.warn("Kafka source '{}': {} still had unsettled records after the revocation grace period of {}; they are "
            + "redelivered to the partitions' next owner, which finds the processed ones duplicates", name,
            revoked.stream().filter(p -> p.unsettled() > 0).toList(), options.revocationGracePeriod());
        return;
      }
      try {
        TimeUnit.MILLISECONDS.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  // Consumer.close(Duration) is deprecated from kafka-clients 4.1 on for close(CloseOptions), which
  // 3.9 does not have; close(Duration) runs on both.
  @SuppressWarnings("deprecation")
  private void close(Consumer<byte[], byte[]> c, @Nullable Throwable failure) {
    try {
      if (failure == null || !(failure instanceof InterruptException)) {
        commitSync(c, new ArrayList<>(assigned.values()), failure == null ? "before closing" : "before closing after an error");
      }
    } catch (Throwable e) {
      log.warn("Kafka source '{}' could not commit before closing ({}); records redelivered meanwhile are found duplicates",
          name, LogText.error(e));
    }
    try {
      c.close(options.closeTimeout());
    } catch (Throwable e) {
      log.warn("Kafka source '{}': closing the consumer failed ({})", name, LogText.error(e));
    }
    assigned.values().forEach(PartitionOffsets::close);
    assigned.clear();
  }

  private static void closeQuietly(@Nullable AutoCloseable closeable) {
    if (closeable != null) {
      try {
        closeable.close();
      } catch (Exception e) {
        log.debug("closing {} failed", closeable, e);
      }
    }
  }

  private static String describe(Map<TopicPartition, OffsetAndMetadata> offsets) {
    Map<String, Long> text = new TreeMap<>();
    offsets.forEach((tp, om) -> text.put(tp.toString(), om.offset()));
    return text.toString();
  }

  private static List<String> sorted(Collection<TopicPartition> partitions) {
    return partitions.stream().map(TopicPartition::toString).sorted().toList();
  }
}
