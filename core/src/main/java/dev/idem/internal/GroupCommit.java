package dev.idem.internal;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Group commit for {@link BatchLanes}: decides whether a lane starts a batch now or lets its
 * items wait for a batch in flight to commit, so that a deep backlog makes fewer, larger
 * transactions instead of one small one per lane.
 *
 * <p>A lane starts at once when its batch would be {@linkplain #fill full}, when no batch is in
 * flight (a message that arrives alone is never held back), or when its items have already waited
 * one typical batch duration (between {@link #MIN_WAIT} and {@link #MAX_WAIT}): so a slow
 * batch (a slow handler, a lock wait) costs the others at most that much, and the lanes still run
 * side by side. Otherwise it waits: when a batch in flight commits, its lane takes what has queued
 * meanwhile, up to the maximum size, as one transaction. The number of transactions at once then
 * follows the load: one while a single writer keeps up, more, each of them full, while the
 * backlog is deeper than one batch.
 *
 * <p>Thread-safe; the lanes call it under their own locks.
 */
public final class GroupCommit {

  /** The longest a lane's items wait for a batch in flight to commit: 50 ms. */
  public static final Duration MAX_WAIT = Duration.ofMillis(50);
  /** The shortest: 1 ms, while no batch has ended yet or batches end sooner. */
  public static final Duration MIN_WAIT = Duration.ofMillis(1);

  /** No group commit: every lane starts whatever it has at once. */
  public static final GroupCommit OFF = new GroupCommit(Integer.MAX_VALUE, false, 0, 0);

  private final int fill;
  private final boolean enabled;
  private final long minWaitNanos;
  private final long maxWaitNanos;
  private final AtomicInteger inFlight = new AtomicInteger();
  /** The moving average of recent batches' durations, in nanoseconds. */
  private volatile long typicalNanos;

  private GroupCommit(int fill, boolean enabled, long minWaitNanos, long maxWaitNanos) {
    this.fill = fill;
    this.enabled = enabled;
    this.minWaitNanos = minWaitNanos;
    this.maxWaitNanos = maxWaitNanos;
  }

  /**
   * Group commit for batches that start at once from {@code fill} items, waiting between
   * {@link #MIN_WAIT} and {@link #MAX_WAIT}.
   *
   * @param fill the batch size that starts at once; at least 2
   * @return the policy
   */
  public static GroupCommit startingAt(int fill) {
    return startingAt(fill, MIN_WAIT, MAX_WAIT);
  }

  /**
   * Group commit with the bounds of the wait given.
   *
   * @param fill the batch size that starts at once; at least 2
   * @param minWait the shortest bound of the wait
   * @param maxWait the longest bound of the wait; at least {@code minWait}
   * @return the policy
   */
  public static GroupCommit startingAt(int fill, Duration minWait, Duration maxWait) {
    if (fill < 2) {
      throw new IllegalArgumentException("fill must be at least 2, was " + fill);
    }
    if (minWait.isNegative() || maxWait.compareTo(minWait) < 0) {
      throw new IllegalArgumentException("need 0 <= minWait <= maxWait, was " + minWait + " and " + maxWait);
    }
    return new GroupCommit(fill, true, minWait.toNanos(), maxWait.toNanos());
  }

  /**
   * The batch size that starts at once.
   *
   * @return the size
   */
  public int fill() {
    return fill;
  }

  /**
   * How much longer a lane with {@code available} items waits before it starts a batch.
   *
   * @param available the items the lane would take now
   * @param waitingSinceNanos when its items began to wait ({@link System#nanoTime()})
   * @param nowNanos now
   * @return nanoseconds to wait, 0 to start now
   */
  long waitNanos(int available, long waitingSinceNanos, long nowNanos) {
    if (!enabled || available >= fill || inFlight.get() == 0) {
      return 0;
    }
    long left = waitingSinceNanos + boundNanos() - nowNanos;
    return Math.max(0, left);
  }

  /** The longest a lane's items wait: one typical batch duration, within the bounds. */
  long boundNanos() {
    return Math.min(maxWaitNanos, Math.max(minWaitNanos, typicalNanos));
  }

  /**
   * A batch started.
   *
   * @return its start, for {@link #ended}
   */
  long started() {
    inFlight.incrementAndGet();
    return System.nanoTime();
  }

  /**
   * A batch ended, by any signal.
   *
   * @param startNanos what {@link #started} returned
   */
  void ended(long startNanos) {
    inFlight.decrementAndGet();
    long took = System.nanoTime() - startNanos;
    long typical = typicalNanos;
    typicalNanos = typical == 0 ? took : typical + (took - typical) / 8;
  }

  /**
   * Batches running now.
   *
   * @return how many
   */
  int inFlight() {
    return inFlight.get();
  }
}
