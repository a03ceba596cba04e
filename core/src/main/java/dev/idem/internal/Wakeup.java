package dev.idem.internal;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * A wake-up signal for polling loops: a loop notes {@link #version()} before it looks for work
 * and then {@link #await}s, which returns at once when a {@link #signal()} came in between, so no
 * signal is lost between looking and waiting.
 */
public final class Wakeup {

  private final AtomicLong version = new AtomicLong();
  private final Sinks.Many<Long> signals = Sinks.many().multicast().directBestEffort();

  /** Wakes every waiter, and every loop that will wait with an older version. */
  public synchronized void signal() {
    signals.tryEmitNext(version.incrementAndGet());
  }

  /**
   * The current version, to pass to {@link #await} later.
   *
   * @return the version
   */
  public long version() {
    return version.get();
  }

  /**
   * Waits for a signal newer than {@code seen}, or at most {@code max}.
   *
   * @param seen the version noted before looking for work
   * @param max the longest wait
   * @return completes on a newer signal or after {@code max}
   */
  public Mono<Void> await(long seen, Duration max) {
    // Subscribe to the signals first, then read the version: a signal in between is seen by one of the two.
    return Flux.merge(signals.asFlux(), Mono.fromCallable(version::get))
        .filter(v -> v != seen)
        .next()
        .then()
        .timeout(max, Mono.empty());
  }
}
