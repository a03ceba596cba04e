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
 * {@link #MAX_WAIT} (50 ms): so a slow batch (a slow handler, a lock wait) costs the others at
 * most that much, and the lanes still run side by side. Otherwise it waits: when a batch in flight
 * commits, its lane takes what has queued meanwhile, up to the maximum size, as one transaction,
 * and the waiting lanes look again. The number of transactions at once then follows the load: one
 * while a single writer keeps up, more, each of them full, while the backlog is deeper than one
 * batch.
 *
 * <p>The wait ends with a commit, not with a timer: an earlier version let a lane start after one
 * typical batch duration, and with the default eight lanes that made eight transactions of half
 * the size where fewer, fuller ones commit more messages per second (docs/benchmarks.md, "Group
 * commit waits for a commit").
 *
 * <p>Thread-safe; the lanes call it under their own locks.
 */
public final class GroupCommit {

  /** The longest a lane's items wait for a batch in flight to commit: 50 ms. */
  public static final Duration MAX_WAIT = Duration.ofMillis(50);

  /** No group commit: every lane starts whatever it has at once. */
  public static final GroupCommit OFF = new GroupCommit(Integer.MAX_VALUE, false, 0);

  private final int fill;
  private final boolean enabled;
  private final long maxWaitNanos;
  private final AtomicInteger inFlight = new AtomicInteger();

  private GroupCommit(int fill, boolean enabled, long maxWaitNanos) {
    this.fill = fill;
    this.enabled = enabled;
    this.maxWaitNanos = maxWaitNanos;
  }

  /**
   * Group commit for batches that start at once from {@code fill} items, waiting at most
   * {@link #MAX_WAIT} for a commit.
   *
   * @param fill the batch size that starts at once; at least 2
   * @return the policy
   */
  public static GroupCommit startingAt(int fill) {
    return startingAt(fill, MAX_WAIT);
  }

  /**
   * Group commit with another bound of the wait.
   *
   * @param fill the batch size that starts at once; at least 2
   * @param maxWait the longest a lane's items wait for a batch in flight to commit; not negative
   * @return the policy
   */
  public static GroupCommit startingAt(int fill, Duration maxWait) {
    if (fill < 2) {
      throw new IllegalArgumentException("fill must be at least 2, was " + fill);
    }
    if (maxWait.isNegative()) {
      throw new IllegalArgumentException("maxWait must not be negative, was " + maxWait);
    }
    return new GroupCommit(fill, true, maxWait.toNanos());
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
    return Math.max(0, waitingSinceNanos + maxWaitNanos - nowNanos);
  }

  /** A batch started. */
  void started() {
    inFlight.incrementAndGet();
  }

  /** A batch ended, by any signal. */
  void ended() {
    inFlight.decrementAndGet();
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
