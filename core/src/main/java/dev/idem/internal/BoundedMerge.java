package dev.idem.internal;

import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscription;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;

/**
 * Runs an asynchronous step for each item of a stream and emits the steps' values as they come,
 * with at most {@code limit} items taken from the stream and not yet done: what
 * {@code flux.flatMap(step, limit, 1)} does, at a constant cost per item.
 *
 * <p>Why not {@code flatMap}: Reactor's flatMap looks at each of its active inner subscribers
 * whenever one of them completes, so with hundreds of steps in flight (the consumer's prefetch)
 * it spends a scan of all of them on every message; in profiles of the batch pipeline that scan
 * was the largest single CPU cost. Here a completion costs the same whatever the number in flight.
 *
 * <p>What it guarantees:
 * <ul>
 *   <li><b>Bounded.</b> An item counts against the {@code limit} from the moment it is requested
 *       from the stream until its step completed empty or its value was delivered downstream;
 *       so steps running plus values waiting for downstream demand never exceed the limit.</li>
 *   <li><b>Errors end it.</b> The first error, of the stream or of a step (or thrown by
 *       {@code step} itself), is emitted at once; the stream and the running steps are cancelled.</li>
 *   <li><b>Completion</b> follows the stream's completion and the end of every step; values
 *       not yet delivered are delivered first.</li>
 *   <li><b>Cancellation</b> cancels the stream and the running steps.</li>
 * </ul>
 */
public final class BoundedMerge {

  private BoundedMerge() {}

  /**
   * The values of {@code step} applied to each item of {@code items}, as they come.
   *
   * @param items the stream
   * @param step the step of one item: at most one value
   * @param limit the most items taken from the stream and not yet done; at least 1
   * @param <I> the item type
   * @param <O> the value type
   * @return the values
   */
  public static <I, O> Flux<O> merge(Flux<I> items, Function<? super I, Mono<O>> step, int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be at least 1, was " + limit);
    }
    Objects.requireNonNull(step, "step");
    return Flux.defer(() -> {
      Merge<I, O> merge = new Merge<>(step, limit);
      return Flux.<O>create(sink -> merge.start(items, sink), FluxSink.OverflowStrategy.BUFFER)
          .doOnNext(value -> merge.replenish(1));
    });
  }

  /** The subscriber to the stream; it owns the running steps. */
  private static final class Merge<I, O> extends BaseSubscriber<I> {
    private final Function<? super I, Mono<O>> step;
    private final int limit;
    /** The running steps, plus one until the stream completed. */
    private final AtomicInteger active = new AtomicInteger(1);
    /** The running steps; a set, so that removing one costs the same whatever the number running. */
    private final Set<Step> running = ConcurrentHashMap.newKeySet();
    private volatile boolean cancelled;
    /** Demand not yet passed to the stream; passed on by one thread at a time (Reactive Streams rule 2.7). */
    private final AtomicLong toRequest = new AtomicLong();
    private final AtomicInteger requesting = new AtomicInteger();
    private @Nullable FluxSink<O> sink;

    Merge(Function<? super I, Mono<O>> step, int limit) {
      this.step = step;
      this.limit = limit;
    }

    void start(Flux<I> items, FluxSink<O> sink) {
      this.sink = sink;
      sink.onDispose(() -> {
        cancelled = true;
        cancel();
        cancelSteps();
      });
      items.subscribe(this);
    }

    @Override
    protected void hookOnSubscribe(Subscription subscription) {
      replenish(limit);
    }

    /**
     * Asks the stream for {@code n} more. Steps end on any thread, so requests are queued and
     * passed on serially; one that arrives while another is passed on (from that request's own
     * signals included) joins it.
     */
    void replenish(long n) {
      toRequest.addAndGet(n);
      if (requesting.getAndIncrement() != 0) {
        return;
      }
      int missed = 1;
      do {
        long demand = toRequest.getAndSet(0);
        if (demand > 0) {
          request(demand);
        }
        missed = requesting.addAndGet(-missed);
      } while (missed != 0);
    }

    @Override
    protected void hookOnNext(I item) {
      Mono<O> work;
      try {
        work = Objects.requireNonNull(step.apply(item), "the step returned null");
      } catch (Throwable error) {
        cancel();
        Objects.requireNonNull(sink).error(error);
        return;
      }
      active.incrementAndGet();
      Step one = new Step();
      running.add(one);
      work.subscribe(one);
      if (cancelled) {
        cancelSteps();
      }
    }

    private void cancelSteps() {
      for (Step step : running) {
        running.remove(step);
        step.dispose();
      }
    }

    @Override
    protected void hookOnError(Throwable error) {
      Objects.requireNonNull(sink).error(error);
    }

    @Override
    protected void hookOnComplete() {
      done();
    }

    private void done() {
      if (active.decrementAndGet() == 0) {
        Objects.requireNonNull(sink).complete();
      }
    }

    /** One item's step. */
    private final class Step extends BaseSubscriber<O> {
      private boolean emitted;

      @Override
      protected void hookOnNext(O value) {
        emitted = true;
        Objects.requireNonNull(sink).next(value);
      }

      @Override
      protected void hookOnComplete() {
        running.remove(this);
        if (!emitted) {
          replenish(1);
        }
        done();
      }

      @Override
      protected void hookOnError(Throwable error) {
        running.remove(this);
        Objects.requireNonNull(sink).error(error);
      }
    }
  }
}
