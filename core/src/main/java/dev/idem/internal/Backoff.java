package dev.idem.internal;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/** Exponential backoff with 50% jitter, as Reactor's {@code Retry.backoff} computes it. */
public final class Backoff {

  private Backoff() {}

  /**
   * The wait before retry number {@code retry} (0 for the first retry).
   *
   * @param first the first wait
   * @param max the longest wait
   * @param retry the retry number, from 0
   * @return {@code min(max, first * 2^retry)}, plus or minus up to half of it
   */
  public static Duration jittered(Duration first, Duration max, int retry) {
    long firstNanos = first.toNanos();
    long maxNanos = max.toNanos();
    int shift = Math.min(Math.max(retry, 0), 62);
    long base = firstNanos > (maxNanos >> shift) ? maxNanos : Math.min(maxNanos, firstNanos << shift);
    long jitter = (long) (base * 0.5 * (ThreadLocalRandom.current().nextDouble() * 2 - 1));
    return Duration.ofNanos(Math.max(0, Math.min(maxNanos, base + jitter)));
  }
}
