package dev.idem.spring.internal;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.ErrorKind;
import dev.idem.Outcome;
import java.time.Duration;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The starter's {@link ConsumerMetrics}: forwards everything to the application's metrics (Micrometer
 * when there is a registry) and keeps what the health indicator needs: the age of the oldest
 * unsettled message and the failures in a row (attempts failed on infrastructure, settlements the
 * adapter could not complete) since the last settled message. Its bookkeeping is bounded by the
 * pipeline's prefetch plus concurrency.
 */
public final class ConsumerTracker implements ConsumerMetrics {

  private final ConsumerMetrics delegate;
  private final Map<Delivery<?>, Long> receivedAt = Collections.synchronizedMap(new IdentityHashMap<>());
  private final AtomicInteger failuresInARow = new AtomicInteger();
  private volatile @Nullable Throwable lastFailure;

  /**
   * Creates a tracker.
   *
   * @param delegate where every event is forwarded
   */
  public ConsumerTracker(ConsumerMetrics delegate) {
    this.delegate = Objects.requireNonNull(delegate, "delegate");
  }

  /**
   * The age of the oldest message received and not settled.
   *
   * @return the age, zero when nothing is unsettled
   */
  public Duration oldestUnsettledAge() {
    long now = System.nanoTime();
    long oldest;
    synchronized (receivedAt) {
      oldest = receivedAt.values().stream().mapToLong(Long::longValue).min().orElse(now);
    }
    return Duration.ofNanos(now - oldest);
  }

  /**
   * Messages received and not settled.
   *
   * @return the count
   */
  public int unsettled() {
    return receivedAt.size();
  }

  /**
   * Failures since the last settled message.
   *
   * @return the count
   */
  public int failuresInARow() {
    return failuresInARow.get();
  }

  /**
   * The last failure counted in {@link #failuresInARow()}.
   *
   * @return the failure, or {@code null}
   */
  public @Nullable Throwable lastFailure() {
    return lastFailure;
  }

  @Override
  public void received(Delivery<?> delivery) {
    receivedAt.put(delivery, System.nanoTime());
    delegate.received(delivery);
  }

  @Override
  public void started(Delivery<?> delivery) {
    delegate.started(delivery);
  }

  @Override
  public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
    if (kind == ErrorKind.INFRASTRUCTURE) {
      lastFailure = error;
      failuresInARow.incrementAndGet();
    }
    delegate.retrying(delivery, error, kind);
  }

  @Override
  public void transaction(Delivery<?> delivery, Duration duration, boolean committed) {
    delegate.transaction(delivery, duration, committed);
  }

  @Override
  public void handler(Delivery<?> delivery, Duration duration) {
    delegate.handler(delivery, duration);
  }

  @Override
  public void settled(Outcome<?> outcome) {
    receivedAt.remove(outcome.delivery());
    failuresInARow.set(0);
    delegate.settled(outcome);
  }

  @Override
  public void abandoned(Delivery<?> delivery) {
    receivedAt.remove(delivery);
    delegate.abandoned(delivery);
  }

  @Override
  public void settlementFailed(Delivery<?> delivery, String step, Throwable error) {
    lastFailure = error;
    failuresInARow.incrementAndGet();
    delegate.settlementFailed(delivery, step, error);
  }
}
