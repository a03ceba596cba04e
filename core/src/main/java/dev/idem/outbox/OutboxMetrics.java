package dev.idem.outbox;

import java.time.Duration;

/**
 * What an {@link OutboxRelay} reports, for metrics. Implementations must be thread-safe and
 * fast. {@link #NONE} is the default; {@code dev.idem.micrometer.MicrometerOutboxMetrics}
 * publishes to Micrometer.
 */
public interface OutboxMetrics {

  /** Reports nothing. */
  OutboxMetrics NONE = new OutboxMetrics() {};

  /**
   * A message was confirmed by its destination and its row marked sent.
   *
   * @param message the message
   * @param delay from the row's creation to the mark
   */
  default void published(OutboxMessage message, Duration delay) {}

  /**
   * A publish attempt failed; the row waits for its next attempt or was parked.
   *
   * @param message the message
   * @param error why
   */
  default void failed(OutboxMessage message, Throwable error) {}

  /**
   * A row reached the attempt limit and was parked.
   *
   * @param message the message
   */
  default void parked(OutboxMessage message) {}

  /**
   * The outbox's figures, read every stats interval.
   *
   * @param stats pending, oldest pending age, parked
   */
  default void stats(OutboxStats stats) {}

  /**
   * Whether {@link #stats} is wanted; the relay skips the stats query otherwise.
   *
   * @return {@code true} for every implementation but {@link #NONE}
   */
  default boolean wantsStats() {
    return this != NONE;
  }
}
