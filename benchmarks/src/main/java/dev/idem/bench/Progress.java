package dev.idem.bench;

import dev.idem.Outcome;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts one row's settled messages and takes the time and this process's CPU time at the first
 * delivery and at the last settlement. Thread-safe.
 */
final class Progress {

  private final long total;
  private final AtomicLong settled = new AtomicLong();
  private final AtomicLong processed = new AtomicLong();
  private final AtomicLong duplicates = new AtomicLong();
  private final AtomicLong deadLettered = new AtomicLong();
  private final AtomicBoolean started = new AtomicBoolean();
  private final CountDownLatch done = new CountDownLatch(1);
  private final long[] latencies;
  private final AtomicInteger latencyCount = new AtomicInteger();
  private volatile long measureFromNanos;
  private volatile long firstNanos;
  private volatile long firstCpu;
  private volatile long endNanos;
  private volatile long endCpu;
  private volatile Throwable error;

  Progress(long total) {
    this(total, 0, Long.MAX_VALUE);
  }

  /** With latencies of the messages published at or after {@code measureFromNanos}. */
  Progress(long total, int latencyCapacity, long measureFromNanos) {
    this.total = total;
    this.latencies = new long[latencyCapacity];
    this.measureFromNanos = measureFromNanos;
  }

  /** Latencies are recorded for messages published at or after this {@code System.nanoTime()}. */
  void measureFrom(long nanos) {
    measureFromNanos = nanos;
  }

  /** A delivery arrived; the first one starts the clock. */
  void received() {
    if (!started.get() && started.compareAndSet(false, true)) {
      firstNanos = System.nanoTime();
      firstCpu = Jvm.cpuNanos();
    }
  }

  void settled(Outcome<Payment> outcome) {
    switch (outcome.status()) {
      case PROCESSED -> processed.incrementAndGet();
      case DUPLICATE -> duplicates.incrementAndGet();
      case DEAD_LETTERED -> deadLettered.incrementAndGet();
    }
    Payment payment = outcome.delivery().payload();
    settledOne(payment == null ? Long.MIN_VALUE : payment.publishedNanos());
  }

  /** One message settled, for the blocking loops, with its latency when it was published in the measured window. */
  void settledOne(long publishedNanos) {
    if (publishedNanos >= measureFromNanos) {
      long latency = System.nanoTime() - publishedNanos;
      int i = latencyCount.getAndIncrement();
      if (i < latencies.length) {
        latencies[i] = latency;
      }
    }
    settledOne();
  }

  /** One message settled, for the blocking loops. */
  void settledOne() {
    if (settled.incrementAndGet() == total) {
      endNanos = System.nanoTime();
      endCpu = Jvm.cpuNanos();
      done.countDown();
    }
  }

  void countEffect(boolean applied) {
    (applied ? processed : duplicates).incrementAndGet();
  }

  void failed(Throwable e) {
    error = e;
    done.countDown();
  }

  /**
   * Waits until every message is settled.
   *
   * @throws IllegalStateException when the stream failed or nothing settled for {@code stall}
   */
  void await(Duration stall) throws InterruptedException {
    long last = -1;
    long lastChange = System.nanoTime();
    while (!done.await(1, TimeUnit.SECONDS)) {
      long now = settled.get();
      if (now != last) {
        last = now;
        lastChange = System.nanoTime();
      } else if (System.nanoTime() - lastChange > stall.toNanos()) {
        throw new IllegalStateException(
            "stalled: " + now + " of " + total + " messages settled, none for " + stall.toSeconds() + " s");
      }
    }
    if (error != null) {
      throw new IllegalStateException("the stream failed: " + error, error);
    }
  }

  boolean isDone() {
    return settled.get() >= total;
  }

  long settled() {
    return settled.get();
  }

  long processed() {
    return processed.get();
  }

  long duplicates() {
    return duplicates.get();
  }

  long deadLettered() {
    return deadLettered.get();
  }

  long nanos() {
    return endNanos - firstNanos;
  }

  long cpuNanos() {
    return endCpu - firstCpu;
  }

  /** The recorded latencies, sorted. */
  long[] sortedLatencies() {
    long[] copy = java.util.Arrays.copyOf(latencies, Math.min(latencyCount.get(), latencies.length));
    java.util.Arrays.sort(copy);
    return copy;
  }
}
