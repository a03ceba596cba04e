package dev.idem.internal;

import java.time.Duration;
import org.slf4j.Logger;

/**
 * The log policy of a loop that retries until its dependency is back: WARN at the first failure,
 * WARN again every {@code interval} with how long it has been failing, DEBUG in between, and INFO
 * when it recovers. Not thread-safe: one per loop.
 */
public final class RetryWarnings {

  private final Logger log;
  private final String what;
  private final Duration interval;
  private int failures;
  private long firstFailureAt;
  private long lastWarningAt;

  /**
   * Creates the policy for one loop.
   *
   * @param log the logger
   * @param what what is being retried, e.g. {@code "Outbox relay 'notifications': claim and publish"}
   * @param interval how often a failure that lasts is logged again at WARN
   */
  public RetryWarnings(Logger log, String what, Duration interval) {
    this.log = log;
    this.what = what;
    this.interval = interval;
  }

  /**
   * Records a failure that will be retried, logging it per the policy.
   *
   * @param error the failure
   * @return how many failures in a row, this one included
   */
  public int failed(Throwable error) {
    long now = System.nanoTime();
    if (failures++ == 0) {
      firstFailureAt = now;
      lastWarningAt = now;
      log.warn("{} failed; retrying with backoff until it succeeds: {}", what, LogText.cut(String.valueOf(error)));
    } else if (now - lastWarningAt >= interval.toNanos()) {
      lastWarningAt = now;
      log.warn("{} has been failing for {} s ({} attempts); still retrying: {}", what,
          Duration.ofNanos(now - firstFailureAt).toSeconds(), failures, LogText.cut(String.valueOf(error)));
    } else {
      log.debug("{} failed again (attempt {}): {}", what, failures, LogText.cut(String.valueOf(error)));
    }
    return failures;
  }

  /** Records a success; logs the recovery when there were failures. */
  public void succeeded() {
    if (failures > 0) {
      log.info("{} works again after {} s ({} failed attempts)", what,
          Duration.ofNanos(System.nanoTime() - firstFailureAt).toSeconds(), failures);
      failures = 0;
    }
  }

  /**
   * Failures in a row so far.
   *
   * @return the count
   */
  public int failures() {
    return failures;
  }
}
