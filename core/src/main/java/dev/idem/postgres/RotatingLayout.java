package dev.idem.postgres;

import java.time.Duration;
import java.util.Objects;

/**
 * The rotating inbox layout for high volumes ({@link PostgresInbox#rotating}): ids live in
 * {@code periods + 2} slot partitions that take turns, one time period each, and retention
 * removes a whole slot with {@code TRUNCATE} once its newest possible id is older than the
 * window: O(1) work per period, no dead rows, no vacuum debt.
 *
 * <p>Guarantee: an id is kept at least {@link #window()} after it was recorded (its
 * {@code processed_at}, the start of the recording transaction) and, while retention runs, at
 * most {@code window + period + the cleanup interval}; inside that time a redelivery of it is
 * a duplicate. Uniqueness across slots is enforced by a per-id transaction-scoped advisory lock
 * followed by a look into every slot, so two concurrent deliveries of one id, even across a
 * period boundary, apply one effect. Costs: one advisory lock per id and one index probe per
 * slot on each insert, and transactions must run at READ COMMITTED (the default; the insert
 * refuses other levels). When retention does not run, slots are reused without being emptied:
 * old ids then stay longer (still counted as duplicates), never shorter.
 *
 * @param window how long ids are kept at least
 * @param periods how many periods the window spans; the period is {@code window / periods}
 */
public record RotatingLayout(Duration window, int periods) {

  /**
   * Validates: the period must be at least one second, periods between 1 and 1,000.
   *
   * @param window how long ids are kept at least
   * @param periods how many periods the window spans; the period is {@code window / periods}
   */
  public RotatingLayout {
    Objects.requireNonNull(window, "window");
    if (periods < 1 || periods > 1_000) {
      throw new IllegalArgumentException("periods must be between 1 and 1000, was " + periods);
    }
    if (window.toMillis() / periods < 1_000) {
      throw new IllegalArgumentException("window / periods must be at least 1 s, was " + window + " / " + periods);
    }
  }

  /**
   * The length of one slot's period.
   *
   * @return {@code window / periods}, in whole milliseconds
   */
  public Duration period() {
    return Duration.ofMillis(window.toMillis() / periods);
  }

  /**
   * The number of slot partitions.
   *
   * @return {@code periods + 2}: the window's periods, the current one, and the one being emptied
   */
  public int slots() {
    return periods + 2;
  }
}
