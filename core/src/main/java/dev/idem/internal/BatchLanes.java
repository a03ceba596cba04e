package dev.idem.internal;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Forms micro-batches on a fixed number of lanes. Each lane runs one batch at a time, in
 * arrival order; while a batch runs, arriving items queue on their lane, and the next batch
 * takes what has queued, up to the maximum size. So batches never wait to fill when the stream
 * is slow (unless a maximum wait is set), and grow with the load.
 *
 * <p>Items wait in one shared queue, in arrival order, and whichever lane forms a batch first takes
 * from it: an item never waits behind a running batch while a lane is idle. A lane that takes an
 * item with a key claims the key: the key's later items go to that lane (after its items that
 * were still in the shared queue) while any of its items runs there, is held back or off the
 * lane, so a key's batches run in order. When the lane forms its next batch, the keys it claimed
 * that have no item in that batch (their items only wait) go back to the shared queue, oldest
 * first, for whichever lane is free first. So a slow batch holds back only the later items of the
 * keys it runs, and keys never pile up behind a busy lane while another idles. Memory is bounded
 * by the caller's demand: the lanes only hold what was submitted to them, and only keys with
 * items there have an entry.
 *
 * <p>With a {@link GroupCommit} a lane that would start a small batch while others run lets its
 * items wait, for a bounded time, for a batch in flight to commit and take them in one larger batch.
 *
 * <p>A batch may move one of its items {@linkplain LaneControl#offLane off its lane} (an item that
 * waits to be retried): it then runs on its own, its lane goes on with the other keys, and the
 * later items of its key are held back, in order, until it ended; they join a batch after that.
 *
 * @param <I> the item type
 * @param <O> the result type, at most one per item
 */
public final class BatchLanes<I, O> implements Disposable {

  private final List<Lane> lanes;
  /** Guards {@link #shared} and {@link #owners}. Lock order: a lane, then this. */
  private final Object claims = new Object();
  /**
   * Items no lane took yet, in arrival order: those without a key, and for each unclaimed key the
   * first of its items (the others wait in its {@link Owner}).
   */
  private final PriorityQueue<LaneItem<I, O>> shared = new PriorityQueue<>(Comparator.comparingLong(p -> p.seq));
  /** Keys with items anywhere in the lanes: the lane that claimed them, if any, and how many. */
  private final Map<String, Owner> owners = new HashMap<>();
  /** The arrival order of submitted items. Guarded by {@link #claims}. */
  private long sequence;
  /** Items in {@link #shared} and its keys' waiting ones, which any lane may take. Guarded by {@link #claims}. */
  private int unclaimed;
  private final GroupCommit group;
  private final int maxBatch;
  private final Duration maxWait;
  private final Function<I, String> laneKey;
  private final BiFunction<List<I>, LaneControl<I, O>, Flux<O>> processor;
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
   * @param group when a lane starts a small batch, or {@link GroupCommit#OFF}
   */
  public BatchLanes(int lanes, int maxBatch, Duration maxWait, Function<I, String> laneKey,
      BiFunction<List<I>, LaneControl<I, O>, Flux<O>> processor, Function<O, I> itemOf, Consumer<I> abandoned,
      GroupCommit group) {
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
    this.group = group;
  }

  /**
   * Submits an item.
   *
   * @param item the item
   * @return its result once its batch finished, empty when it has none, or the batch's error
   */
  public Mono<O> submit(I item) {
    return Mono.create(sink -> {
      String key = laneKey.apply(item);
      LaneItem<I, O> pending = new LaneItem<>(item, key, sink, this::releaseKey, abandoned);
      Lane claimed = null;
      boolean refused = false;
      synchronized (claims) {
        pending.seq = ++sequence;
        if (disposed) {
          refused = true;
          pending.key = null; // not counted for its key
        } else if (key == null) {
          shared.add(pending);
          unclaimed++;
        } else {
          Owner owner = owners.get(key);
          if (owner == null) {
            owner = new Owner();
            owners.put(key, owner);
            shared.add(pending);
          }
          owner.items++;
          if (owner.lane != null) {
            claimed = owner.lane;
          } else {
            Objects.requireNonNull(owner.waiting).add(pending);
            unclaimed++;
          }
        }
      }
      if (refused) {
        pending.abandon();
      } else if (claimed != null) {
        claimed.enqueue(pending);
      } else {
        // A running lane takes the item when its batch ends (it looks at the shared queue under
        // its own lock before it stops, after the item was added): no item is left behind.
        for (Lane lane : lanes) {
          if (lane.tryStart()) {
            lane.start();
            break;
          }
        }
      }
    });
  }

  /** Starts idle lanes while the shared queue has items for them. */
  private void startIdleLanes() {
    for (Lane lane : lanes) {
      synchronized (claims) {
        if (shared.isEmpty()) {
          return;
        }
      }
      if (lane.tryStart()) {
        lane.start();
      }
    }
  }

  /** After a batch ended: the idle lanes with items of their own, or all while the shared queue has items, look again. */
  private void wakeWaitingLanes(Lane ended) {
    boolean anyShared;
    synchronized (claims) {
      anyShared = unclaimed > 0;
    }
    for (Lane lane : lanes) {
      if (lane != ended && (anyShared || lane.hasOwnItems()) && lane.tryStart()) {
        lane.runNext();
      }
    }
  }

  /** Cancels running batches and off-lane work (their transactions roll back) and abandons queued and held-back items. */
  @Override
  public void dispose() {
    disposed = true;
    for (Lane lane : lanes) {
      lane.dispose();
    }
    List<LaneItem<I, O>> left = new ArrayList<>();
    synchronized (claims) {
      for (LaneItem<I, O> first : shared) {
        Owner owner = first.key == null ? null : owners.get(first.key);
        if (owner != null && owner.waiting != null) {
          left.addAll(owner.waiting);
        } else {
          left.add(first);
        }
      }
      shared.clear();
    }
    left.forEach(LaneItem::abandon);
  }

  @Override
  public boolean isDisposed() {
    return disposed;
  }

  /** A key with items in the lanes. Guarded by {@link #claims}. */
  private final class Owner {
    /** The lane that claimed the key, or null while its items wait in the shared queue. */
    @Nullable Lane lane;
    /** Its items in the shared queue, in order, until a lane claims it; then null. */
    @Nullable ArrayDeque<LaneItem<I, O>> waiting = new ArrayDeque<>();
    /** Its items anywhere in the lanes. */
    int items;
  }

  /** An item ended: it no longer holds its key on its lane; the last one frees the key. */
  private void releaseKey(String key) {
    synchronized (claims) {
      Owner owner = owners.get(key);
      if (owner != null && --owner.items == 0) {
        owners.remove(key);
      }
    }
  }

  private final class Lane implements LaneControl<I, O> {
    private final ArrayDeque<LaneItem<I, O>> queue = new ArrayDeque<>();
    /** Keys with an item off the lane, each with its later items held back, in order. */
    private final Map<String, ArrayDeque<LaneItem<I, O>>> held = new HashMap<>();
    /** Keys whose off-lane item ended; their held items go back to the queue when the next batch forms. */
    private final List<String> released = new ArrayList<>();
    /** The running batch's items that still wait for a result. */
    private Map<I, LaneItem<I, O>> current = new IdentityHashMap<>();
    private final Set<Disposable> offLane = Collections.newSetFromMap(new IdentityHashMap<>());
    private boolean running;
    private @Nullable Disposable currentBatch;
    /** When this lane's items began to wait for a batch in flight to commit ({@link GroupCommit}); 0 while they do not. */
    private long waitingSince;
    private boolean timerArmed;

    void enqueue(LaneItem<I, O> pending) {
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
        pending.abandon();
        return;
      }
      start();
    }

    synchronized boolean hasOwnItems() {
      return !queue.isEmpty();
    }

    /** Looks again after {@code nanos}, if the lane is idle then: its items' wait for a group commit ends. Under the lane's lock. */
    private void armTimer(long nanos) {
      if (timerArmed) {
        return;
      }
      timerArmed = true;
      Schedulers.parallel().schedule(() -> {
        synchronized (this) {
          timerArmed = false;
        }
        if (tryStart()) {
          runNext();
        }
      }, nanos, TimeUnit.NANOSECONDS);
    }

    /** Marks an idle lane as running; the caller then {@link #start}s it. */
    synchronized boolean tryStart() {
      if (running || disposed) {
        return false;
      }
      running = true;
      return true;
    }

    /** Forms the next batch of a lane marked running, at once or after the maximum wait. */
    void start() {
      if (maxWait.isZero()) {
        runNext();
      } else {
        Schedulers.parallel().schedule(this::runNext, maxWait.toNanos(), TimeUnit.NANOSECONDS);
      }
    }

    private void runNext() {
      List<LaneItem<I, O>> batch = new ArrayList<>();
      Map<I, LaneItem<I, O>> byItem = new IdentityHashMap<>();
      boolean freed;
      synchronized (this) {
        for (int i = released.size() - 1; i >= 0; i--) {
          ArrayDeque<LaneItem<I, O>> waiting = held.remove(released.get(i));
          if (waiting != null) {
            for (Iterator<LaneItem<I, O>> it = waiting.descendingIterator(); it.hasNext();) {
              queue.addFirst(it.next());
            }
          }
        }
        released.clear();
        // The lane's own items and the shared ones, oldest first: neither waits on the other for
        // long, however busy the lane's own keys are.
        synchronized (claims) {
          long now = System.nanoTime();
          int available = queue.size() + unclaimed;
          long since = waitingSince == 0 ? now : waitingSince;
          long wait = disposed || available == 0 ? 0 : group.waitNanos(available, since, now);
          if (wait > 0) {
            // Group commit: wait for a batch in flight; keys that only wait here go back to the shared queue.
            waitingSince = since;
            freeWaitingKeys();
            running = false;
            armTimer(wait);
            return;
          }
          waitingSince = 0;
          LaneItem<I, O> own = nextOwn();
          while (batch.size() < maxBatch) {
            LaneItem<I, O> first = disposed ? null : shared.peek();
            if (own == null && first == null) {
              break;
            }
            if (first == null || (own != null && own.seq < first.seq)) {
              batch.add(own);
              own = nextOwn();
              continue;
            }
            shared.poll();
            Owner owner = first.key == null ? null : owners.get(first.key);
            if (owner == null) {
              unclaimed--;
              batch.add(first);
              continue;
            }
            // The first item of an unclaimed key: this lane claims the key and takes its items in
            // order, queueing what does not fit (the batch is full then) ahead of the key's later
            // items, which come to this lane from now on.
            owner.lane = this;
            ArrayDeque<LaneItem<I, O>> waiting = owner.waiting;
            owner.waiting = null;
            unclaimed -= Objects.requireNonNull(waiting).size();
            while (!waiting.isEmpty() && batch.size() < maxBatch) {
              batch.add(waiting.poll());
            }
            queue.addAll(waiting);
          }
          if (own != null) {
            queue.addFirst(own);
          }
          freed = freeWaitingKeys();
        }
        if (batch.isEmpty() || disposed) {
          running = false;
        } else {
          for (LaneItem<I, O> p : batch) {
            byItem.put(p.item, p);
          }
          current = byItem;
        }
      }
      if (byItem.isEmpty()) {
        // Outside the lane's lock: another lane's start takes its own.
        if (freed) {
          startIdleLanes();
        }
        return;
      }
      List<I> items = new ArrayList<>(batch.size());
      for (LaneItem<I, O> p : batch) {
        items.add(p.item);
      }
      group.started();
      BatchRun<I, O> subscriber = new BatchRun<>(this, byItem, itemOf, group, () -> {
        runNext();
        wakeWaitingLanes(this);
      });
      synchronized (this) {
        currentBatch = subscriber;
      }
      if (freed) {
        startIdleLanes();
      }
      Flux.defer(() -> processor.apply(items, this)).subscribe(subscriber);
    }

    /**
     * Gives up the keys whose items only wait in this lane's queue: they go back to the shared
     * queue, oldest first, for whichever lane is free first (the key's order holds: none of its
     * items runs), so keys never pile up behind a busy lane while others idle. Under both locks.
     *
     * @return whether any item went back to the shared queue
     */
    private boolean freeWaitingKeys() {
      if (queue.isEmpty()) {
        return false;
      }
      // A key goes back only when every one of its items is in this queue. That keeps the keys
      // with an item in the batch just formed, held back or off the lane (each counted in its
      // owner, none queued here), and those with an item that a submit assigned to this lane but
      // did not enqueue yet (outside the lane's lock).
      Map<String, Integer> queued = new HashMap<>();
      for (LaneItem<I, O> p : queue) {
        if (p.key != null) {
          queued.merge(p.key, 1, Integer::sum);
        }
      }
      boolean freed = false;
      for (Iterator<LaneItem<I, O>> it = queue.iterator(); it.hasNext();) {
        LaneItem<I, O> p = it.next();
        if (p.key == null) {
          it.remove();
          shared.add(p);
          unclaimed++;
          freed = true;
          continue;
        }
        Owner owner = owners.get(p.key);
        if (owner == null
            || (owner.lane == this ? owner.items != Objects.requireNonNull(queued.get(p.key)) : owner.lane != null)) {
          continue;
        }
        it.remove();
        if (owner.lane == this) {
          owner.lane = null;
          owner.waiting = new ArrayDeque<>();
          shared.add(p);
        }
        Objects.requireNonNull(owner.waiting).add(p);
        unclaimed++;
        freed = true;
      }
      return freed;
    }

    /** The next item of the lane's queue whose key is not held back (those go to their key's held items); null when none. */
    private @Nullable LaneItem<I, O> nextOwn() {
      for (LaneItem<I, O> p; (p = queue.poll()) != null;) {
        ArrayDeque<LaneItem<I, O>> waiting = p.key == null ? null : held.get(p.key);
        if (waiting == null) {
          return p;
        }
        waiting.add(p);
      }
      return null;
    }

    @Override
    public synchronized List<I> admit(List<I> items) {
      List<I> admitted = new ArrayList<>(items.size());
      for (I item : items) {
        LaneItem<I, O> p = current.get(item);
        ArrayDeque<LaneItem<I, O>> waiting = p == null || p.key == null ? null : held.get(p.key);
        if (waiting != null) {
          current.remove(item);
          waiting.add(Objects.requireNonNull(p));
        } else {
          admitted.add(item);
        }
      }
      return admitted;
    }

    @Override
    public void offLane(I item, Mono<O> work) {
      LaneItem<I, O> p;
      synchronized (this) {
        p = current.remove(item);
        if (p == null) {
          throw new IllegalArgumentException("not an item of the running batch: " + item);
        }
        if (p.key != null) {
          held.computeIfAbsent(p.key, k -> new ArrayDeque<>());
        }
      }
      Disposable.Swap subscription = Disposables.swap();
      synchronized (this) {
        offLane.add(subscription);
      }
      subscription.update(work.subscribe(
          result -> {
            ended(p, subscription);
            p.succeed(result);
          },
          error -> {
            ended(p, subscription);
            p.fail(error);
          },
          () -> {
            if (ended(p, subscription)) {
              p.succeed();
            }
          }));
    }

    /** An off-lane item ended: its key is released at the next batch; an idle lane starts one. Once per item. */
    private boolean ended(LaneItem<I, O> p, Disposable subscription) {
      boolean start;
      synchronized (this) {
        if (!offLane.remove(subscription)) {
          return false;
        }
        if (p.key != null) {
          released.add(p.key);
        }
        start = !running && !disposed;
        if (start) {
          running = true;
        }
      }
      if (start) {
        runNext();
      }
      return true;
    }

    void dispose() {
      List<LaneItem<I, O>> left;
      List<Disposable> cancelled;
      Disposable batch;
      synchronized (this) {
        left = new ArrayList<>(queue);
        queue.clear();
        held.values().forEach(left::addAll);
        held.clear();
        released.clear();
        cancelled = new ArrayList<>(offLane);
        offLane.clear();
        batch = currentBatch;
      }
      if (batch != null) {
        batch.dispose();
      }
      cancelled.forEach(Disposable::dispose);
      left.forEach(LaneItem::abandon);
    }
  }
}
