package dev.idem;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;

/**
 * Base class for adapters that makes settlement idempotent and thread-safe.
 *
 * <p>The first call to {@link #ack()} or {@link #deadLetter(DeadLetter)} runs
 * {@link #doAck()} or {@link #doDeadLetter(DeadLetter)}; calls made while it runs, and every
 * call after it succeeded (of either method, from any thread), share that one settlement. A
 * settlement that failed is forgotten, so a later call tries again (the pipeline retries a
 * dead-letter publish that failed on broken infrastructure); an adapter whose settlement cannot
 * be repeated (an ack on a channel that has closed) must keep failing it in
 * {@code doAck}/{@code doDeadLetter}, and the broker then redelivers the message.
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
   * Tells whether a settlement is running or has succeeded.
   *
   * @return {@code true} once a settlement was started and has not failed
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
      AtomicReference<Mono<Void>> self = new AtomicReference<>();
      Mono<Void> mine = Mono.defer(action)
          .doOnError(error -> settlement.compareAndSet(self.get(), null))
          .cache();
      self.set(mine);
      if (settlement.compareAndSet(null, mine)) {
        return mine;
      }
      Mono<Void> winner = settlement.get();
      return winner != null ? winner : settleOnce(action);
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
