package dev.idem.spring;

import dev.idem.RetryPolicy;
import java.time.Duration;

/** Retries of a consumer ({@code idem.consumers.<name>.retry.*}); defaults of {@link RetryPolicy#defaults()}. */
public class IdemRetryProperties {
  private int maxAttempts = RetryPolicy.DEFAULT_MAX_ATTEMPTS;
  private Duration firstBackoff = RetryPolicy.DEFAULT_FIRST_BACKOFF;
  private Duration maxBackoff = RetryPolicy.DEFAULT_MAX_BACKOFF;
  private Duration infrastructureBackoff = RetryPolicy.DEFAULT_FIRST_BACKOFF;
  private Duration infrastructureMaxBackoff = RetryPolicy.DEFAULT_MAX_BACKOFF;
  private int maxContentionRetries = RetryPolicy.DEFAULT_MAX_CONTENTION_RETRIES;

  /** Creates the settings with their defaults. */
  public IdemRetryProperties() {}

  /**
   * Attempts for retryable handler errors, counting the first, before the message is
   * dead-lettered. Default {@value RetryPolicy#DEFAULT_MAX_ATTEMPTS}.
   *
   * @return the attempts
   */
  public int getMaxAttempts() {
    return maxAttempts;
  }

  /**
   * Sets the attempts.
   *
   * @param maxAttempts at least 1
   */
  public void setMaxAttempts(int maxAttempts) {
    this.maxAttempts = maxAttempts;
  }

  /**
   * The wait before the second attempt. Default 100 ms.
   *
   * @return the wait
   */
  public Duration getFirstBackoff() {
    return firstBackoff;
  }

  /**
   * Sets the first wait.
   *
   * @param firstBackoff positive
   */
  public void setFirstBackoff(Duration firstBackoff) {
    this.firstBackoff = firstBackoff;
  }

  /**
   * The longest wait between attempts. Default 5 s.
   *
   * @return the wait
   */
  public Duration getMaxBackoff() {
    return maxBackoff;
  }

  /**
   * Sets the longest wait.
   *
   * @param maxBackoff not shorter than the first
   */
  public void setMaxBackoff(Duration maxBackoff) {
    this.maxBackoff = maxBackoff;
  }

  /**
   * The first wait after an infrastructure error (retried without limit). Default 100 ms.
   *
   * @return the wait
   */
  public Duration getInfrastructureBackoff() {
    return infrastructureBackoff;
  }

  /**
   * Sets the first infrastructure wait.
   *
   * @param infrastructureBackoff positive
   */
  public void setInfrastructureBackoff(Duration infrastructureBackoff) {
    this.infrastructureBackoff = infrastructureBackoff;
  }

  /**
   * The longest wait while infrastructure stays broken. Default 5 s.
   *
   * @return the wait
   */
  public Duration getInfrastructureMaxBackoff() {
    return infrastructureMaxBackoff;
  }

  /**
   * Sets the longest infrastructure wait.
   *
   * @param infrastructureMaxBackoff not shorter than the first
   */
  public void setInfrastructureMaxBackoff(Duration infrastructureMaxBackoff) {
    this.infrastructureMaxBackoff = infrastructureMaxBackoff;
  }

  /**
   * Contention failures in a row (deadlock, serialization failure, lock timeout) retried
   * without spending an attempt. Default {@value RetryPolicy#DEFAULT_MAX_CONTENTION_RETRIES}.
   *
   * @return the retries
   */
  public int getMaxContentionRetries() {
    return maxContentionRetries;
  }

  /**
   * Sets the contention retries.
   *
   * @param maxContentionRetries at least 0
   */
  public void setMaxContentionRetries(int maxContentionRetries) {
    this.maxContentionRetries = maxContentionRetries;
  }

  /**
   * The policy these settings describe.
   *
   * @return the retry policy
   * @throws IllegalArgumentException naming the setting that is invalid
   */
  public RetryPolicy toPolicy() {
    return new RetryPolicy(maxAttempts, firstBackoff, maxBackoff, infrastructureBackoff, infrastructureMaxBackoff,
        maxContentionRetries);
  }
}
