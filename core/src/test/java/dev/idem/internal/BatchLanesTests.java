package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * How {@link BatchLanes} spreads items: whichever lane forms a batch first takes the waiting
 * items; a key stays on the lane that took it while it has items there, and is free again once
 * it has none. Batches here end when the test releases them, so every step is deterministic (the
 * lanes start batches on the submitting thread when no maximum wait is set).
 */
class BatchLanesTests {

  private record Item(String key, int n) {}

  /** Records each batch and ends it (emitting its items) when released. */
  private static final class Batches implements BiFunction<List<Item>, LaneControl<Item, Item>, Flux<Item>> {
    final List<List<Item>> formed = new CopyOnWriteArrayList<>();
    final List<Sinks.Empty<Void>> releases = new CopyOnWriteArrayList<>();
    final List<LaneControl<Item, Item>> controls = new CopyOnWriteArrayList<>();

    @Override
    public Flux<Item> apply(List<Item> items, LaneControl<Item, Item> lane) {
      Sinks.Empty<Void> release = Sinks.empty();
      formed.add(List.copyOf(items));
      releases.add(release);
      controls.add(lane);
      return release.asMono().thenMany(Flux.defer(() -> Flux.fromIterable(lane.admit(items))));
    }

    void release(int batch) {
      releases.get(batch).tryEmitEmpty();
    }
  }

  private final Batches batches = new Batches();
  private final List<Item> results = new CopyOnWriteArrayList<>();
  private final List<Item> abandoned = new CopyOnWriteArrayList<>();

  private BatchLanes<Item, Item> lanes(int lanes, int maxBatch) {
    return new BatchLanes<>(lanes, maxBatch, Duration.ZERO, Item::key, batches, item -> item, abandoned::add, GroupCommit.OFF);
  }

  private void submit(BatchLanes<Item, Item> lanes, String key, int n) {
    lanes.submit(new Item(key, n)).subscribe(results::add);
  }

  @Test
  void keysWhoseHashesShareALaneStillRunAtOnce() {
    BatchLanes<Item, Item> lanes = lanes(8, 16);
    assertThat(Math.floorMod("a".hashCode(), 8)).isEqualTo(Math.floorMod("i".hashCode(), 8)); // the same lane by hash
    submit(lanes, "a", 1);
    submit(lanes, "i", 1);
    assertThat(batches.formed).as("batches running").containsExactly(List.of(new Item("a", 1)), List.of(new Item("i", 1)));
  }

  @Test
  void aKeyStaysOnItsLaneInOrderWhileItHasItemsThere() {
    BatchLanes<Item, Item> lanes = lanes(2, 16);
    submit(lanes, "a", 1);
    submit(lanes, "a", 2);
    submit(lanes, "a", 3);
    submit(lanes, "b", 1); // lane 0 holds a's three items: b goes to the idle lane 1
    assertThat(batches.formed).containsExactly(List.of(new Item("a", 1)), List.of(new Item("b", 1)));
    batches.release(0);
    assertThat(batches.formed).hasSize(3);
    assertThat(batches.formed.get(2)).as("a's later items, after a1, on its lane").containsExactly(new Item("a", 2),
        new Item("a", 3));
    batches.release(2);
    batches.release(1);
    assertThat(results).containsExactly(new Item("a", 1), new Item("a", 2), new Item("a", 3), new Item("b", 1));
  }

  @Test
  void aKeyWithNothingLeftOnItsLaneIsFreeForAnyLane() {
    BatchLanes<Item, Item> lanes = lanes(2, 16);
    submit(lanes, "a", 1);
    batches.release(0); // a has nothing left on lane 0
    submit(lanes, "b", 1); // both lanes idle: lane 0
    submit(lanes, "a", 2); // lane 0 runs b: lane 1 takes a and starts at once
    assertThat(batches.formed).containsExactly(List.of(new Item("a", 1)), List.of(new Item("b", 1)), List.of(new Item("a", 2)));
  }

  @Test
  void aSlowBatchHoldsBackOnlyTheLaterItemsOfItsOwnKeys() {
    BatchLanes<Item, Item> lanes = lanes(2, 16);
    submit(lanes, "a", 1); // lane 0, and it stays running (slow)
    submit(lanes, "b", 1); // lane 1
    submit(lanes, "b", 2); // b is lane 1's: queued there
    submit(lanes, "a", 2); // a is lane 0's: queued behind a1
    submit(lanes, "c", 1); // c is nobody's: waits for the first lane to form a batch
    batches.release(1);
    assertThat(batches.formed).hasSize(3);
    assertThat(batches.formed.get(2)).as("lane 1's next batch, while a1 still runs").containsExactly(new Item("b", 2),
        new Item("c", 1));
    batches.release(2);
    assertThat(results).containsExactly(new Item("b", 1), new Item("b", 2), new Item("c", 1));
    batches.release(0);
    assertThat(batches.formed.get(3)).containsExactly(new Item("a", 2));
  }

  @Test
  void keysWhoseItemsOnlyWaitOnABusyLaneGoToAnIdleOne() {
    BatchLanes<Item, Item> lanes = lanes(2, 3);
    submit(lanes, "x", 1); // lane 0: batch 0
    submit(lanes, "y", 1); // lane 1: batch 1, running until the end
    submit(lanes, "a", 1);
    submit(lanes, "b", 1);
    submit(lanes, "c", 1);
    batches.release(0); // lane 0 takes a, b and c
    assertThat(batches.formed.get(2)).containsExactly(new Item("a", 1), new Item("b", 1), new Item("c", 1));
    submit(lanes, "a", 2); // a, b and c are lane 0's: their later items queue there
    submit(lanes, "z", 1);
    submit(lanes, "b", 2);
    submit(lanes, "c", 2);
    batches.release(2); // lane 0's next batch, oldest first, is full before c2
    assertThat(batches.formed.get(3)).containsExactly(new Item("a", 2), new Item("z", 1), new Item("b", 2));
    batches.release(1); // lane 1 is free: it takes c2, whose key no longer runs on lane 0
    assertThat(batches.formed).hasSize(5);
    assertThat(batches.formed.get(4)).as("while lane 0's batch still runs").containsExactly(new Item("c", 2));
    batches.release(4);
    batches.release(3);
    assertThat(results).containsExactly(new Item("x", 1), new Item("a", 1), new Item("b", 1), new Item("c", 1), new Item("y", 1),
        new Item("c", 2), new Item("a", 2), new Item("z", 1), new Item("b", 2));
  }

  @Test
  void aLaneThatTakesAKeyTakesItsWaitingItemsInOrderAndTheRestQueueAheadOfLaterOnes() {
    BatchLanes<Item, Item> lanes = lanes(1, 2);
    submit(lanes, "x", 1);
    submit(lanes, "a", 1);
    submit(lanes, "a", 2);
    submit(lanes, "a", 3);
    batches.release(0);
    assertThat(batches.formed.get(1)).containsExactly(new Item("a", 1), new Item("a", 2));
    submit(lanes, "a", 4); // a is the lane's now: queued after a3
    batches.release(1);
    assertThat(batches.formed.get(2)).containsExactly(new Item("a", 3), new Item("a", 4));
    batches.release(2);
    assertThat(results).containsExactly(new Item("x", 1), new Item("a", 1), new Item("a", 2), new Item("a", 3), new Item("a", 4));
  }

  @Test
  void aLanesOwnBusyKeysDoNotStarveTheItemsWaitingForAnyLane() {
    BatchLanes<Item, Item> lanes = lanes(1, 1);
    submit(lanes, "a", 1);
    submit(lanes, "a", 2); // a is the lane's
    submit(lanes, "b", 1); // waits for any lane
    submit(lanes, "a", 3);
    for (int batch = 0; batch < 4; batch++) {
      batches.release(batch);
    }
    assertThat(batches.formed).as("oldest first across the lane's queue and the shared one")
        .containsExactly(List.of(new Item("a", 1)), List.of(new Item("a", 2)), List.of(new Item("b", 1)),
            List.of(new Item("a", 3)));
  }

  @Test
  void itemsWithoutAKeyNeverWaitBehindARunningBatchWhileALaneIsIdle() {
    BatchLanes<Item, Item> lanes = lanes(3, 16);
    submit(lanes, null, 1);
    submit(lanes, null, 2);
    submit(lanes, null, 3);
    assertThat(batches.formed).containsExactly(List.of(new Item(null, 1)), List.of(new Item(null, 2)),
        List.of(new Item(null, 3)));
  }

  @Test
  void itemsWithoutAKeyGoToTheFirstLaneThatFormsABatchUpToTheMaximum() {
    BatchLanes<Item, Item> lanes = lanes(2, 3);
    for (int n = 1; n <= 6; n++) {
      submit(lanes, null, n);
    }
    assertThat(batches.formed).hasSize(2);
    batches.release(1);
    assertThat(batches.formed.get(2)).as("the next batch of the lane that ended first").containsExactly(new Item(null, 3),
        new Item(null, 4),
        new Item(null, 5));
    batches.release(2);
    assertThat(batches.formed.get(3)).containsExactly(new Item(null, 6));
    batches.release(3);
    batches.release(0);
    assertThat(results).extracting(Item::n).containsExactlyInAnyOrder(1, 2, 3, 4, 5, 6);
  }

  @Test
  void anItemOffItsLaneHoldsBackItsKeyButNotItsLane() {
    BatchLanes<Item, Item> lanes = lanes(1, 16);
    submit(lanes, "a", 1);
    Sinks.One<Item> offLane = Sinks.one();
    batches.controls.get(0).offLane(batches.formed.get(0).get(0), offLane.asMono()); // the lanes know items by identity
    submit(lanes, "a", 2);
    submit(lanes, "b", 1);
    batches.release(0); // the batch ends without a1, which runs on
    assertThat(batches.formed).hasSize(2);
    assertThat(batches.formed.get(1)).as("the lane goes on with b; a2 waits for a1").containsExactly(new Item("b", 1));
    batches.release(1);
    offLane.tryEmitValue(new Item("a", 1));
    assertThat(batches.formed).hasSize(3);
    assertThat(batches.formed.get(2)).containsExactly(new Item("a", 2));
    batches.release(2);
    assertThat(results).containsExactly(new Item("b", 1), new Item("a", 1), new Item("a", 2));
  }

  @Test
  void disposingAbandonsWhatIsQueuedSharedOrHeld() {
    BatchLanes<Item, Item> lanes = lanes(1, 16);
    submit(lanes, "a", 1);
    submit(lanes, "a", 2);
    submit(lanes, null, 1);
    lanes.dispose();
    assertThat(abandoned).containsExactlyInAnyOrder(new Item("a", 2), new Item(null, 1));
    submit(lanes, "c", 1);
    submit(lanes, null, 2);
    assertThat(abandoned).contains(new Item("c", 1), new Item(null, 2));
    assertThat(batches.formed).hasSize(1);
  }

  /**
   * Many items of a few keys and without keys, batches ending on parallel threads: every item
   * ends once, each key's items are processed in their order, and never more batches run at once
   * than there are lanes.
   */
  @RepeatedTest(30)
  void underConcurrencyEveryItemEndsOnceInItsKeysOrder() {
    int lanesCount = 4;
    AtomicInteger running = new AtomicInteger();
    AtomicInteger mostRunning = new AtomicInteger();
    Map<String, List<Integer>> processed = new ConcurrentHashMap<>();
    BiFunction<List<Item>, LaneControl<Item, Item>, Flux<Item>> processor = (items, lane) -> Flux.defer(() -> {
      mostRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
      for (Item item : items) {
        processed.computeIfAbsent(String.valueOf(item.key()), k -> new CopyOnWriteArrayList<>()).add(item.n());
      }
      return Mono.delay(Duration.ofNanos(ThreadLocalRandom.current().nextInt(50_000)), Schedulers.parallel())
          .thenMany(Flux.fromIterable(items))
          .doOnTerminate(running::decrementAndGet); // before the lane hears of the end and forms its next batch
    });
    BatchLanes<Item, Item> lanes = new BatchLanes<>(lanesCount, 8, Duration.ZERO, Item::key, processor, item -> item,
        abandoned::add, GroupCommit.OFF);
    int total = 5_000;
    List<Item> ended = Flux.range(0, total)
        .map(n -> new Item(n % 7 == 0 ? null : "k" + n % 13, n))
        .flatMap(lanes::submit, 64)
        .collectList()
        .block(Duration.ofSeconds(60));
    assertThat(ended).hasSize(total).doesNotHaveDuplicates();
    assertThat(abandoned).isEmpty();
    assertThat(mostRunning.get()).isLessThanOrEqualTo(lanesCount);
    processed.forEach((key, ns) -> {
      if (!key.equals("null")) {
        List<Integer> sorted = new ArrayList<>(ns);
        sorted.sort(Integer::compare);
        assertThat(ns).as("the order of key %s", key).isEqualTo(sorted);
      }
    });
  }
}
