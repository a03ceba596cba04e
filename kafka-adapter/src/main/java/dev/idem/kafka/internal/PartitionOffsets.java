package dev.idem.kafka.internal;

import org.apache.kafka.common.TopicPartition;

/**
 * The offsets of one assigned partition that the native engine handed out and that are not yet
 * below its commit watermark, in the order they were handed out (ascending; compaction and
 * transaction markers leave gaps). Settling an offset marks it; the watermark, the offset to
 * commit, is the first unsettled offset, or the offset after the last one handed out when all
 * are settled. So an offset is committed only when it and every earlier offset handed out are
 * settled, whatever order they settle in.
 *
 * <p>A ring of offsets and flags, searched by binary search: no allocation per record.
 * Thread-safe: the polling thread hands out and commits, pipeline threads settle. Once
 * {@linkplain #close() closed} (its partition revoked or lost, or its consumer closed) it ignores
 * settlements, so a late acknowledgement can never commit for a partition this consumer no longer
 * owns.
 */
final class PartitionOffsets {

  private final TopicPartition partition;
  private long[] offsets = new long[64];
  private boolean[] settled = new boolean[64];
  private int head;
  private int size;
  private int unsettled;
  private long next = -1;
  private long committed = -1;
  private long commitRequested = -1;
  private boolean closed;

  PartitionOffsets(TopicPartition partition) {
    this.partition = partition;
  }

  TopicPartition partition() {
    return partition;
  }

  /**
   * Whether {@code offset} continues this partition's ascending order: it does not when the
   * consumer's position went back (the topic was deleted and recreated, or its offsets reset).
   *
   * @param offset the next record's offset
   * @return {@code true} when it is above every offset handed out before
   */
  synchronized boolean continuesWith(long offset) {
    return offset >= next;
  }

  /**
   * An offset was handed out; offsets come in ascending order.
   *
   * @param offset the record's offset
   */
  synchronized void handedOut(long offset) {
    if (size == offsets.length) {
      grow();
    }
    int at = (head + size) & (offsets.length - 1);
    offsets[at] = offset;
    settled[at] = false;
    size++;
    unsettled++;
    next = offset + 1;
  }

  /**
   * An offset was settled (processed, found a duplicate or dead-lettered).
   *
   * @param offset the record's offset
   * @return whether this settled it: {@code false} when it was settled before, is unknown, or
   *     the partition is closed
   */
  synchronized boolean settle(long offset) {
    if (closed) {
      return false;
    }
    int at = find(offset);
    if (at < 0 || settled[at]) {
      return false;
    }
    settled[at] = true;
    unsettled--;
    int mask = offsets.length - 1;
    while (size > 0 && settled[head]) {
      head = (head + 1) & mask;
      size--;
    }
    return true;
  }

  /**
   * The offset to commit: the first unsettled one, or the one after the last handed out.
   *
   * @return the offset, or {@code -1} when nothing was handed out
   */
  synchronized long watermark() {
    return size == 0 ? next : offsets[head];
  }

  /**
   * The settled offsets that wait behind an unsettled earlier one of this partition.
   *
   * @return how many
   */
  synchronized int deferred() {
    return size - unsettled;
  }

  /**
   * Offsets handed out and not settled.
   *
   * @return how many
   */
  synchronized int unsettled() {
    return unsettled;
  }

  /**
   * The watermark if it moved past what was last committed or asked to be committed.
   *
   * @return the offset to commit now, or {@code -1}
   */
  synchronized long toCommit() {
    long w = size == 0 ? next : offsets[head];
    return w > commitRequested ? w : -1;
  }

  /** A commit of {@code offset} was sent. */
  synchronized void commitRequested(long offset) {
    commitRequested = Math.max(commitRequested, offset);
  }

  /** The broker confirmed a commit of {@code offset}. */
  synchronized void committed(long offset) {
    committed = Math.max(committed, offset);
  }

  /** A commit failed: the next commit asks again for what the broker has not confirmed. */
  synchronized void commitFailed() {
    commitRequested = committed;
  }

  /** Its partition is no longer this consumer's; later settlements are ignored. */
  synchronized void close() {
    closed = true;
  }

  private int find(long offset) {
    int mask = offsets.length - 1;
    int lo = 0;
    int hi = size - 1;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      long value = offsets[(head + mid) & mask];
      if (value < offset) {
        lo = mid + 1;
      } else if (value > offset) {
        hi = mid - 1;
      } else {
        return (head + mid) & mask;
      }
    }
    return -1;
  }

  private void grow() {
    int capacity = offsets.length;
    long[] o = new long[capacity * 2];
    boolean[] s = new boolean[capacity * 2];
    for (int i = 0; i < size; i++) {
      o[i] = offsets[(head + i) & (capacity - 1)];
      s[i] = settled[(head + i) & (capacity - 1)];
    }
    offsets = o;
    settled = s;
    head = 0;
  }

  @Override
  public synchronized String toString() {
    return partition + "[watermark=" + watermark() + ", unsettled=" + unsettled + ", deferred=" + deferred() + "]";
  }
}
