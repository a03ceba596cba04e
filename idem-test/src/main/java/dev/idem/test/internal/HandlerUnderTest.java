package dev.idem.test.internal;

import dev.idem.BatchHandler;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;

/**
 * The user's handler, either kind: installs a new instance, instrumented, into a consumer builder.
 * Every call of the installed handler is an {@link Attempt} with the failure plan current at that
 * moment.
 *
 * @param <T> the payload type
 */
public abstract sealed class HandlerUnderTest<T> {

  private HandlerUnderTest() {}

  /**
   * A per-message handler.
   *
   * @param handlers makes instances
   * @param <T> the payload type
   * @return the handler under test
   */
  public static <T> HandlerUnderTest<T> perMessage(Supplier<? extends Handler<T>> handlers) {
    return new PerMessage<>(handlers);
  }

  /**
   * A batch handler.
   *
   * @param handlers makes instances
   * @param <T> the payload type
   * @return the handler under test
   */
  public static <T> HandlerUnderTest<T> batch(Supplier<? extends BatchHandler<T>> handlers) {
    return new Batch<>(handlers);
  }

  /**
   * Installs an instrumented handler.
   *
   * @param freshPerCall a new instance of the user's handler for every call, instead of one for the consumer
   */
  abstract void install(IdempotentConsumer.Builder<T> builder, AtomicLong statements, IntSupplier failAfter,
      boolean freshPerCall);

  static Publisher<?> attempt(AtomicLong statements, IntSupplier failAfter,
      java.util.function.Function<Attempt, Publisher<?>> body) {
    return Flux.defer(() -> {
      Attempt attempt = new Attempt(statements, failAfter.getAsInt());
      return Flux.from(body.apply(attempt))
          .thenMany(Flux.defer(() -> attempt.failureDue() ? Flux.error(attempt.failure()) : Flux.empty()));
    });
  }

  private static final class PerMessage<T> extends HandlerUnderTest<T> {
    private final Supplier<? extends Handler<T>> handlers;

    PerMessage(Supplier<? extends Handler<T>> handlers) {
      this.handlers = handlers;
    }

    @Override
    void install(IdempotentConsumer.Builder<T> builder, AtomicLong statements, IntSupplier failAfter,
        boolean freshPerCall) {
      Handler<T> shared = freshPerCall ? null : handlers.get();
      builder.handler((payload, tx) -> attempt(statements, failAfter,
          a -> (shared != null ? shared : handlers.get()).handle(payload, new InstrumentedTx(tx, a))));
    }
  }

  private static final class Batch<T> extends HandlerUnderTest<T> {
    private final Supplier<? extends BatchHandler<T>> handlers;

    Batch(Supplier<? extends BatchHandler<T>> handlers) {
      this.handlers = handlers;
    }

    @Override
    void install(IdempotentConsumer.Builder<T> builder, AtomicLong statements, IntSupplier failAfter,
        boolean freshPerCall) {
      BatchHandler<T> shared = freshPerCall ? null : handlers.get();
      builder.batchHandler((items, tx) -> attempt(statements, failAfter,
          a -> (shared != null ? shared : handlers.get()).handle(items, new InstrumentedTx(tx, a))));
    }
  }
}
