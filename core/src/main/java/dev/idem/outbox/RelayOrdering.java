package dev.idem.outbox;

/** Which outbox rows an {@link OutboxRelay} may send at the same time. */
public enum RelayOrdering {

  /**
   * Rows of one key are sent one at a time, in sequence order (the order of their ids, which is
   * commit order when the writes of one key do not overlap in time, as under the consumer's
   * {@code Ordering.BY_KEY}): a row is sent only after every earlier row of its key was sent. A
   * row that waits for a retry, and a parked row, hold back the later rows of its key until it is
   * sent (or re-sent after parking, or deleted). Rows without a key are not ordered. Several
   * relays keep the order too. The default.
   *
   * <p>Cost: at most one row per key per batch, so a backlog on few keys drains at one
   * round trip per row; and each claim reads the unsent rows in order until it has found a batch
   * of keys, so a long backlog on one key makes each claim read that backlog.
   */
  BY_KEY,

  /**
   * Rows are sent in batches with no order among them, and a failing row holds back nothing.
   * Highest throughput; use it when consumers do not care about order (or restore it).
   */
  UNORDERED
}
