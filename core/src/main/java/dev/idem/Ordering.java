package dev.idem;

/**
 * Which messages may be processed at the same time. Every mode keeps at most
 * {@code concurrency} messages in flight; they differ in what may overlap.
 */
public enum Ordering {
  /**
   * Never two messages with the same {@link Delivery#orderingKey()} in flight; messages of one
   * key are processed in delivery order, including their retries. Different keys run in
   * parallel. Messages without a key are not ordered.
   *
   * <p>Cost: a message waiting for its key holds one of the {@code concurrency} slots, so a hot
   * key reduces parallelism. Memory is bounded by {@code concurrency}: no per-key state is kept
   * for keys that are not in flight.
   */
  BY_KEY,
  /**
   * Never two messages of the same {@link Delivery#partition()} in flight; each partition is
   * processed strictly in delivery order, partitions in parallel. The Kafka adapter's classic
   * mode. Messages without a partition are not ordered.
   *
   * <p>Cost: parallelism is at most the number of assigned partitions.
   */
  BY_PARTITION,
  /**
   * Any messages may run at the same time, up to {@code concurrency}. Highest throughput; no
   * order between effects. Use it when effects commute (counters, upserts by id).
   */
  UNORDERED
}
