package dev.idem.retention;

import java.time.Duration;

/**
 * What {@link Retention} reports, for metrics. Implementations must be thread-safe.
 * {@link #NONE} is the default; {@code dev.idem.micrometer.MicrometerRetentionMetrics} publishes to
 * Micrometer.
 */
public interface RetentionMetrics {

  /** Reports nothing. */
  RetentionMetrics NONE = new RetentionMetrics() {};

  /**
   * One cleanup batch (a bounded {@code DELETE}, or the {@code TRUNCATE} of one slot) finished.
   *
   * @param table the table it cleaned
   * @param removed rows removed (for a truncated slot, PostgreSQL's estimate of its rows)
   * @param took how long the batch took, lock wait included
   */
  default void batch(String table, long removed, Duration took) {}

  /**
   * The age of the oldest row a table keeps, after a cleanup run.
   *
   * @param table the table
   * @param age the age; zero when the table is empty
   */
  default void oldestKept(String table, Duration age) {}
}
