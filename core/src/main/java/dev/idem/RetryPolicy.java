package dev.idem;

import java.time.Duration;
import java.util.Objects;

/**
 * How often and how fast a failing message is tried again before it is dead-lettered, and how
 * the pipeline waits out broken infrastructure.
 *
 * <p>Immutable. {@link #defaults()}: 5 attempts with exponential backoff from 100 ms to 5 s for
 * {@link ErrorKind#RETRYABLE} errors; up to {@value #DEFAULT_MAX_CONTENTION_RETRIES}
 * {@link ErrorKind#CONTENTION} retries in a row (deadlocks, serialization failures, lock
 * timeouts) with the same backoff that do not spend attempts; infrastructure errors are retried
 * without limit with backoff from 100 ms to 5 s, and logged at WARN when they start and then
 * every minute while they last. Backoffs are exponential with 50% jitter. A message the broker
 * has delivered {@code maxAttempts} times or more ({@link Delivery#deliveryAttempt()}: a Kafka
 * share group's or a RabbitMQ quorum queue's delivery count) is not retried in memory after a
 * retryable failure: earlier deliveries already ran it, so it is dead-lettered
 * ({@link DeadLetterReason#RETRIES_EXHAUSTED}) at once, before a crash loop reaches the broker's
 * own delivery limit, which would drop it without a dead letter.
 *
 * @param maxAttempts total processing attempts for retryable errors, counting the first; at least 1
 * @param firstBackoff the wait before the second attempt
 * @param maxBackoff the longest wait between attempts
 * @param infrastructureBackoff the first wait after an infrastructure error
 * @param infrastructureMaxBackoff the longest wait while infrastructure stays broken
 * @param maxContentionRetries contention failures in a row retried without spending an
 *     attempt; at least 0
 */
public record RetryPolicy(
    int maxAttempts,
    Duration firstBackoff,
    Duration maxBackoff,
    Duration infrastructureBackoff,
    Duration infrastructureMaxBackoff,
    int maxContentionRetries) {

  /** Default attempt limit: {@value}. */
  public static final int DEFAULT_MAX_ATTEMPTS = 5;
  /** Default first backoff: 100 ms. */
  public static final Duration DEFAULT_FIRST_BACKOFF = Duration.ofMillis(100);
  /** Default maximum backoff: 5 s. */
  public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofSeconds(5);

  /** Default contention retries that spend no attempt: {@value}. */
  public static final int DEFAULT_MAX_CONTENTION_RETRIES = 20;

  /**
   * A policy with the default contention retries.
   *
   * @param maxAttempts total processing attempts for retryable errors, counting the first
   * @param firstBackoff the wait before the second attempt
   * @param maxBackoff the longest wait between attempts
   * @param infrastructureBackoff the first wait after an infrastructure error
   * @param infrastructureMaxBackoff the longest wait while infrastructure stays broken
   */
  public RetryPolicy(int maxAttempts, Duration firstBackoff, Duration maxBackoff, Duration infrastructureBackoff,
      Duration infrastructureMaxBackoff) {
    this(maxAttempts, firstBackoff, maxBackoff, infrastructureBackoff, infrastructureMaxBackoff, DEFAULT_MAX_CONTENTION_RETRIES);
  }

  /**
   * Validates the components, naming the one that is wrong.
   *
   * @param maxAttempts total processing attempts for retryable errors, counting the first; at least 1
   * @param firstBackoff the wait before the second attempt
   * @param maxBackoff the longest wait between attempts
   * @param infrastructureBackoff the first wait after an infrastructure error
   * @param infrastructureMaxBackoff the longest wait while infrastructure stays broken
   * @param maxContentionRetries contention failures in a row retried without spending an
   *     attempt; at least 0
   */
  public RetryPolicy {
    if (maxContentionRetries < 0) {
      throw new IllegalArgumentException("maxContentionRetries must not be negative, was " + maxContentionRetries);
    }
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be at least 1, was " + maxAttempts);
    }
    requirePositive(firstBackoff, "firstBackoff");
    requirePositive(maxBackoff, "maxBackoff");
    requirePositive(infrastructureBackoff, "infrastructureBackoff");
    requirePositive(infrastructureMaxBackoff, "infrastructureMaxBackoff");
    if (maxBackoff.compareTo(firstBackoff) < 0) {
      throw new IllegalArgumentException(
          "maxBackoff (" + maxBackoff + ") must not be shorter than firstBackoff (" + firstBackoff + ")");
    }
    if (infrastructureMaxBackoff.compareTo(infrastructureBackoff) < 0) {
      throw new IllegalArgumentException("infrastructureMaxBackoff must not be shorter than infrastructureBackoff");
    }
  }

  /**
   * The defaults described on the type.
   *
   * @return the default policy
   */
  public static RetryPolicy defaults() {
    return backoff(DEFAULT_MAX_ATTEMPTS, DEFAULT_FIRST_BACKOFF);
  }

  /**
   * Exponential backoff with the given attempt limit and first wait; other settings default.
   *
   * @param maxAttempts total attempts, counting the first
   * @param firstBackoff the wait before the second attempt
   * @return the policy
   */
  public static RetryPolicy backoff(int maxAttempts, Duration firstBackoff) {
    Duration max = DEFAULT_MAX_BACKOFF.compareTo(firstBackoff) < 0 ? firstBackoff : DEFAULT_MAX_BACKOFF;
    return new RetryPolicy(maxAttempts, firstBackoff, max, DEFAULT_FIRST_BACKOFF, DEFAULT_MAX_BACKOFF);
  }

  /**
   * No retries: the first retryable failure dead-letters the message.
   *
   * @return the policy
   */
  public static RetryPolicy none() {
    return backoff(1, DEFAULT_FIRST_BACKOFF);
  }

  /**
   * A copy with other infrastructure backoff bounds.
   *
   * @param first the first wait
   * @param max the longest wait
   * @return the new policy
   */
  public RetryPolicy withInfrastructureBackoff(Duration first, Duration max) {
    return new RetryPolicy(maxAttempts, firstBackoff, maxBackoff, first, max, maxContentionRetries);
  }

  /**
   * A copy with another bound on contention retries.
   *
   * @param retries contention failures in a row retried without spending an attempt; at least 0
   * @return the new policy
   */
  public RetryPolicy withMaxContentionRetries(int retries) {
    return new RetryPolicy(maxAttempts, firstBackoff, maxBackoff, infrastructureBackoff, infrastructureMaxBackoff, retries);
  }

  private static void requirePositive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(name + " must be positive, was " + d);
    }
  }
}
