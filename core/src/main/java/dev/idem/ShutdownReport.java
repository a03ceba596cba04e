package dev.idem;

import java.time.Duration;
import java.util.Objects;

/**
 * What a {@link GracefulShutdown#stop(Duration) graceful stop} did.
 *
 * <p>{@code completedInFlight + abandonedInFlight} is the number of messages that were in flight
 * when the stop began. Messages that had not started are never started: they stay
 * unacknowledged and the broker redelivers them.
 *
 * @param completedInFlight messages in flight at the stop that finished (committed or found a
 *     duplicate or dead-lettered, and settled) within the grace period
 * @param abandonedInFlight messages in flight at the stop that were cancelled: their
 *     transactions rolled back, or they were waiting in a retry backoff that ended after the grace
 *     period; they stay unacknowledged
 * @param notStarted messages received from the source that never started; they stay
 *     unacknowledged
 * @param withinGracePeriod {@code true} when everything in flight finished before the grace
 *     period ran out ({@code abandonedInFlight} can still be positive, for messages whose retry
 *     backoff ended after the grace period)
 * @param took from the call to {@code stop} until the stream terminated
 */
public record ShutdownReport(int completedInFlight, int abandonedInFlight, int notStarted, boolean withinGracePeriod,
    Duration took) {

  /** The report of a stop that found nothing running. */
  static final ShutdownReport NOTHING_RUNNING = new ShutdownReport(0, 0, 0, true, Duration.ZERO);

  /**
   * Checks the figures.
   *
   * @param completedInFlight not negative
   * @param abandonedInFlight not negative
   * @param notStarted not negative
   * @param withinGracePeriod whether the grace period sufficed
   * @param took not negative
   */
  public ShutdownReport {
    Objects.requireNonNull(took, "took");
    if (completedInFlight < 0 || abandonedInFlight < 0 || notStarted < 0 || took.isNegative()) {
      throw new IllegalArgumentException("negative figure in a shutdown report: completedInFlight=" + completedInFlight
          + ", abandonedInFlight=" + abandonedInFlight + ", notStarted=" + notStarted + ", took=" + took);
    }
  }

  /** The report of several streams stopped together: the sums, and the longest time. */
  ShutdownReport plus(ShutdownReport other) {
    return new ShutdownReport(completedInFlight + other.completedInFlight, abandonedInFlight + other.abandonedInFlight,
        notStarted + other.notStarted, withinGracePeriod && other.withinGracePeriod,
        took.compareTo(other.took) >= 0 ? took : other.took);
  }
}
