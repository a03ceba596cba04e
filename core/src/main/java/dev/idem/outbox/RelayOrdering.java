package dev.idem.outbox;

/** Which outbox rows an {@link OutboxRelay} may send at the same time. */
public enum RelayOrdering {

  /**
   * Rows of one key are published one at a time, in sequence order, with any number of relays
   * and workers on the table: a row is handed to the publisher only after every row of its key
   * with a smaller {@code seq} was confirmed by its destination and marked {@code SENT} in a
   * committed transaction. A row that waits for a retry, and a parked row, hold back the later
   * rows of its key until it is sent (or re-sent after parking, or deleted). Rows without a key
   * are not ordered. The default.
   *
   * <p>What "sequence order" covers: {@code seq} is given when a row is inserted, and a relay sees
   * a row only once its transaction committed. So when two transactions write rows of one key at
   * overlapping times, the row of the transaction that commits first can be sent first even if
   * its {@code seq} is larger; rows of one key follow each other in {@code seq} order whenever
   * their writers do not overlap, as under the consumer's {@code Ordering.BY_KEY} or when the
   * writers lock a common row before adding to the outbox. And the relay is at least once: a row
   * whose round lost its transaction after publishing (a crashed relay, a lost connection, a failed
   * mark), or whose confirmation did not come within {@code publishTimeout}, is published again
   * before any later row of its key, but the first copy may reach the destination later than that
   * (for instance from another relay's producer that was still retrying it); it carries the same
   * message id, so a deduplicating consumer drops it.
   *
   * <p>Cost: at most one row per key per round, so a backlog on few keys drains at one round (a
   * transaction and a confirmed publish) per row and key, however many relays and workers run;
   * they add throughput across keys only. Each claim reads the unsent rows in order until it has
   * found a batch of keys, so a long backlog on one key makes each claim read that backlog.
   */
  BY_KEY,

  /**
   * Rows are sent in batches with no order among them, and a failing row holds back nothing.
   * Highest throughput; use it when consumers do not care about order (or restore it).
   */
  UNORDERED
}
