package dev.idem.pipeline;

import dev.idem.BatchHandler;
import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.Handler;
import dev.idem.internal.DriverBoundary;
import dev.idem.internal.MessageObservations;
import dev.idem.internal.TxHandle;
import dev.idem.pipeline.PipelineFailures.HandlerFailure;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.util.context.Context;

/**
 * Runs the user's effect inside a transaction: the per-message {@link Handler} here, a
 * {@link BatchHandler} through {@link #guardedEffect}. Whatever the effect throws or signals, a JVM
 * error included, ends the attempt as a {@link HandlerFailure}, so that it is told apart from the
 * transaction's own errors.
 *
 * @param <T> the payload type
 */
final class EffectRunner<T> {

  private final @Nullable Handler<T> handler;
  private final ConsumerMetrics metrics;

  EffectRunner(ConsumerSettings<T> settings) {
    this.handler = settings.handler();
    this.metrics = settings.metrics();
  }

  /** The per-message effect; errors carry the message's index in its run. */
  Mono<Boolean> runHandler(Delivery<T> delivery, TxHandle tx, int index) {
    long start = System.nanoTime();
    return guardedEffect(() -> Objects.requireNonNull(handler).handle(Objects.requireNonNull(delivery.payload()), tx), index)
        .doOnSuccess(ignored -> metrics.handler(delivery, Duration.ofNanos(System.nanoTime() - start)))
        .thenReturn(true);
  }

  /**
   * Subscribes the user's effect. Reactor's own operators rethrow JVM errors
   * ({@code Exceptions.throwIfJvmFatal}) instead of signalling them; subscribing with a plain
   * Subscriber inside try/catch turns every Throwable that reaches this point, thrown or
   * signalled, into a {@link HandlerFailure}.
   */
  static Mono<Void> guardedEffect(Supplier<Publisher<?>> effect, int index) {
    return Mono.<Void>create(sink -> {
      try {
        Objects.requireNonNull(MessageObservations.inScope(sink.contextView(), effect), "handler returned null")
            .subscribe(new EffectSubscriber(sink, index));
      } catch (Throwable e) {
        sink.error(new HandlerFailure(e, index));
      }
    });
  }

  /**
   * Completes the sink when the handler's publisher completes; wraps its error as the handler's.
   * A {@link CoreSubscriber}, so that the handler's publisher sees the pipeline's
   * Reactor context: the current observation, and the transaction a framework's transaction
   * runner binds there (Spring's {@code TransactionalOperator} does), which the handler's
   * repositories must find.
   */
  private static final class EffectSubscriber implements CoreSubscriber<Object> {
    private final MonoSink<Void> sink;
    private final int index;
    private volatile @Nullable Subscription subscription;

    EffectSubscriber(MonoSink<Void> sink, int index) {
      this.sink = sink;
      this.index = index;
    }

    @Override
    public Context currentContext() {
      return DriverBoundary.withReporter(Context.of(sink.contextView()), this::jvmError);
    }

    @Override
    public void onSubscribe(Subscription subscription) {
      this.subscription = subscription;
      sink.onCancel(subscription::cancel);
      subscription.request(Long.MAX_VALUE);
    }

    /** A JVM error that the handler's operators raised on the driver's thread: the attempt ends with it. */
    private void jvmError(Throwable error) {
      Subscription s = subscription;
      if (s != null) {
        s.cancel();
      }
      sink.error(new HandlerFailure(error, index));
    }

    @Override
    public void onNext(Object value) {
      // values of the effect are ignored
    }

    @Override
    public void onError(Throwable error) {
      sink.error(new HandlerFailure(error, index));
    }

    @Override
    public void onComplete() {
      sink.success();
    }
  }
}
