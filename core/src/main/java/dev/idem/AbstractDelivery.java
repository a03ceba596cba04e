package dev.idem;

import dev.idem.internal.InPlaceAcks;
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
 * <p>An adapter whose acknowledgement is a quick, non-blocking step on the calling thread (marking
 * an offset settled, say) may also override {@link #acksInPlace()} and {@link #doAckInPlace()}:
 * the pipeline then acknowledges a committed batch's messages with a plain call each instead of a
 * {@link Mono} each. The same once-only rules hold. By default an adapter acknowledges only
 * through {@link #doAck()}.
 *
 * @param <T> the payload type
 */
public abstract class AbstractDelivery<T> implements Delivery<T> {

  /** The settlement of a delivery acknowledged in place: done. */
  private static final Mono<Void> ACKED_IN_PLACE = Mono.empty();
  /** An acknowledgement in place under way: a settlement asked for meanwhile waits for its end (it is quick). */
  private static final Mono<Void> ACKING_IN_PLACE = Mono
      .error(new IllegalStateException("an acknowledgement in place is under way"));

  static {
    InPlaceAcks.install(new InPlaceAcks.Access() {
      @Override
      public boolean acksInPlace(AbstractDelivery<?> delivery) {
        return delivery.acksInPlace();
      }

      @Override
      public boolean ackInPlace(AbstractDelivery<?> delivery) {
        return delivery.ackInPlace();
      }
    });
  }

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
   * Acknowledges on the calling thread, without a {@link Mono}, when the adapter
   * {@linkplain #acksInPlace() can}; the pipeline's way for a committed batch. Once only, as
   * {@link #ack()}: it returns {@code false} (and does nothing) when the adapter cannot ack in
   * place or another settlement was started; an ack that threw is forgotten, as a failed
   * {@link #ack()} is, and the error propagates.
   *
   * @return {@code true} when this call acknowledged the message
   */
  final boolean ackInPlace() {
    if (!acksInPlace() || !settlement.compareAndSet(null, ACKING_IN_PLACE)) {
      return false;
    }
    try {
      doAckInPlace();
    } catch (RuntimeException | Error e) {
      settlement.set(null);
      throw e;
    }
    settlement.set(ACKED_IN_PLACE);
    return true;
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
      while (existing == ACKING_IN_PLACE) {
        // doAckInPlace is a quick, non-blocking step: wait for its end, then share its success or try again.
        Thread.onSpinWait();
        existing = settlement.get();
      }
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
      return winner != null && winner != ACKING_IN_PLACE ? winner : settleOnce(action);
    });
  }

  /**
   * Acknowledges the message; called at most once.
   *
   * @return completes when the acknowledgement is done
   */
  protected abstract Mono<Void> doAck();

  /**
   * Whether {@link #doAckInPlace()} acknowledges this message; {@code false} by default.
   *
   * @return {@code true} when the adapter acknowledges in place
   */
  protected boolean acksInPlace() {
    return false;
  }

  /**
   * Acknowledges the message on the calling thread, at once and without blocking (it runs on the
   * pipeline's threads, the database driver's among them); called at most once, and only when
   * {@link #acksInPlace()} says so. It must do what {@link #doAck()} does, and throw where that
   * fails.
   *
   * @throws UnsupportedOperationException by default
   */
  protected void doAckInPlace() {
    throw new UnsupportedOperationException(getClass().getName() + " does not acknowledge in place");
  }

  /**
   * Publishes the dead letter durably and then acknowledges the original; called at most once.
   *
   * @param deadLetter why the message cannot be processed
   * @return completes when both are done
   */
  protected abstract Mono<Void> doDeadLetter(DeadLetter deadLetter);
}
