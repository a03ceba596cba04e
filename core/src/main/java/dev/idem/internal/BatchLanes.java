package dev.idem.internal;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;
import reactor.core.Disposable;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Schedulers;

/**
 * Forms micro-batches on a fixed number of lanes. Each lane runs one batch at a time, in
 * arrival order; while a batch runs, arriving items queue on their lane, and the next batch
 * takes what has queued, up to the maximum size. So batches never wait to fill when the stream
 * is slow (unless a maximum wait is set), and grow with the load.
 *
 * <p>Items of one lane key always go to the same lane ({@code hash % lanes}), so their batches
 * are processed in order; items without a key go to the lane with the shortest queue.
 * Memory is bounded by the caller's demand: a lane only holds what was submitted to it.
 *
 * @param <I> the item type
 * @param <O> the result type, at most one per item
 */
public final class BatchLanes<I, O> implements Disposable {

  private final List<Lane> lanes;
  private final int maxBatch;
  private final Duration maxWait;
  private final Function<I, String> laneKey;
  private final Function<List<I>, Flux<O>> processor;
  private final Function<O, I> itemOf;
  private final Consumer<I> abandoned;
  private volatile boolean disposed;

  /**
   * Creates the lanes.
   *
   * @param lanes the number of lanes: batches that run at once
   * @param maxBatch the largest batch
   * @param maxWait how long an idle lane waits for a batch to fill before it starts; zero for not at all
   * @param laneKey the key that pins an item to a lane, or {@code null} for any lane
   * @param processor runs one batch, emitting at most one result per item, in any order
   * @param itemOf the item a result belongs to
   * @param abandoned told of items that leave without a result because the lanes were disposed
   */
  public BatchLanes(int lanes, int maxBatch, Duration maxWait, Function<I, String> laneKey,
      Function<List<I>, Flux<O>> processor, Function<O, I> itemOf, Consumer<I> abandoned) {
    this.lanes = new ArrayList<>(lanes);
    for (int i = 0; i < lanes; i++) {
      this.lanes.add(new Lane());
    }
    this.maxBatch = maxBatch;
    this.maxWait = maxWait;
    this.laneKey = laneKey;
    this.processor = processor;
    this.itemOf = itemOf;
    this.abandoned = abandoned;
  }

  /**
   * Submits an item.
   *
   * @param item the item
   * @return its result once its batch finished, empty when it has none, or the batch's error
   */
  public Mono<O> submit(I item) {
    return Mono.create(sink -> laneFor(item).enqueue(new Pending(item, sink)));
  }

  private Lane laneFor(I item) {
    String key = laneKey.apply(item);
    if (key != null) {
      return lanes.get(Math.floorMod(key.hashCode(), lanes.size()));
    }
    Lane shortest = lanes.get(0);
    for (Lane lane : lanes) {
      if (lane.size() < shortest.size()) {
        shortest = lane;
      }
    }
    return shortest;
  }

  /** Cancels running batches (their transactions roll back) and abandons queued items. */
  @Override
  public void dispose() {
    disposed = true;
    for (Lane lane : lanes) {
      lane.dispose();
    }
  }

  @Override
  public boolean isDisposed() {
    return disposed;
  }

  private final class Pending {
    final I item;
    final MonoSink<O> sink;

    Pending(I item, MonoSink<O> sink) {
      this.item = item;
      this.sink = sink;
    }
  }

  private final class Lane {
    private final ArrayDeque<Pending> queue = new ArrayDeque<>();
    private boolean running;
    private Disposable current;

    synchronized int size() {
      return queue.size();
    }

    void enqueue(Pending pending) {
      synchronized (this) {
        if (!disposed) {
          queue.add(pending);
          if (running) {
            return;
          }
          running = true;
        }
      }
      if (disposed) {
        abandoned.accept(pending.item);
        pending.sink.success();
        return;
      }
      if (maxWait.isZero()) {
        runNext();
      } else {
        Schedulers.parallel().schedule(this::runNext, maxWait.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
      }
    }

    private void runNext() {
      List<Pending> batch = new ArrayList<>();
      synchronized (this) {
        while (batch.size() < maxBatch && !queue.isEmpty()) {
          batch.add(queue.poll());
        }
        if (batch.isEmpty() || disposed) {
          running = false;
          return;
        }
      }
      Map<I, Pending> byItem = new IdentityHashMap<>();
      List<I> items = new ArrayList<>(batch.size());
      for (Pending p : batch) {
        byItem.put(p.item, p);
        items.add(p.item);
      }
      BaseSubscriber<O> subscriber = new BaseSubscriber<>() {
        @Override
        protected void hookOnNext(O result) {
          Pending p = byItem.remove(itemOf.apply(result));
          if (p != null) {
            p.sink.success(result);
          }
        }

        @Override
        protected void hookOnError(Throwable error) {
          byItem.values().forEach(p -> p.sink.error(error));
          byItem.clear();
        }

        @Override
        protected void hookOnComplete() {
          byItem.values().forEach(p -> p.sink.success());
          byItem.clear();
          runNext();
        }
      };
      synchronized (this) {
        current = subscriber;
      }
      Flux.defer(() -> processor.apply(items)).subscribe(subscriber);
    }

    void dispose() {
      List<Pending> left;
      Disposable running;
      synchronized (this) {
        left = new ArrayList<>(queue);
        queue.clear();
        running = current;
      }
      if (running != null) {
        running.dispose();
      }
      for (Pending p : left) {
        abandoned.accept(p.item);
        p.sink.success();
      }
    }
  }
}
