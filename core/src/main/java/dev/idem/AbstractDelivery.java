package dev.idem;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;

/**
 * Base class for adapters that makes settlement idempotent and thread-safe.
 *
 * <p>The first call to {@link #ack()} or {@link #deadLetter(DeadLetter)} runs
 * {@link #doAck()} or {@link #doDeadLetter(DeadLetter)} once and caches its outcome; every later
 * call (of either method, from any thread) replays that outcome. A settlement that failed stays
 * failed: the broker redelivers such a message, and the dedup table absorbs the redelivery.
 *
 * @param <T> the payload type
 */
public abstract class AbstractDelivery<T> implements Delivery<T> {

  private final AtomicReference<Mono<Void>> settlement = new AtomicReference<>();

  @Override
  public final Mono<Void> ack() {
    return settleOnce(this::doAck);
  }

  @Override
  public final Mono<Void> deadLetter(DeadLetter deadLetter) {
    Objects.requireNonNull(deadLetter, "deadLetter");
    return settleOnce(() -> doDeadLetter(deadLetter));
  }

  /**
   * Tells whether {@link #ack()} or {@link #deadLetter(DeadLetter)} has been called.
   *
   * @return {@code true} once a settlement was started
   */
  public final boolean isSettled() {
    return settlement.get() != null;
  }

  private Mono<Void> settleOnce(java.util.function.Supplier<Mono<Void>> action) {
    return Mono.defer(() -> {
      Mono<Void> existing = settlement.get();
      if (existing != null) {
        return existing;
      }
      Mono<Void> mine = Mono.defer(action).cache();
      return settlement.compareAndSet(null, mine) ? mine : settlement.get();
    });
  }

  /**
   * Acknowledges the message; called at most once.
   *
   * @return completes when the acknowledgement is done
   */
  protected abstract Mono<Void> doAck();

  /**
   * Publishes the dead letter durably and then acknowledges the original; called at most once.
   *
   * @param deadLetter why the message cannot be processed
   * @return completes when both are done
   */
  protected abstract Mono<Void> doDeadLetter(DeadLetter deadLetter);
}
