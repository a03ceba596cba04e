package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * Group commit in {@link BatchLanes}: a lane that would start a batch below the fill while
 * another batch is in flight lets its items wait for that batch to commit, and its lane takes
 * them in one batch; a full batch, or one with nothing in flight, starts at once; the wait is
 * bounded. Batches end when the test releases them; with a bound of a minute the steps are
 * deterministic.
 */
class GroupCommitLanesTests {

  private record Item(String key, int n) {}

  /** Records each batch and ends it (emitting its items) when released. */
  private static final class Batches implements BiFunction<List<Item>, LaneControl<Item, Item>, Flux<Item>> {
    final List<List<Item>> formed = new CopyOnWriteArrayList<>();
    final List<Sinks.Empty<Void>> releases = new CopyOnWriteArrayList<>();

    @Override
    public Flux<Item> apply(List<Item> items, LaneControl<Item, Item> lane) {
      Sinks.Empty<Void> release = Sinks.empty();
      formed.add(List.copyOf(items));
      releases.add(release);
      return release.asMono().thenMany(Flux.defer(() -> Flux.fromIterable(lane.admit(items))));
    }

    void release(int batch) {
      releases.get(batch).tryEmitEmpty();
    }
  }

  private final Batches batches = new Batches();
  private final List<Item> results = new CopyOnWriteArrayList<>();
  private final List<Item> abandoned = new CopyOnWriteArrayList<>();

  private BatchLanes<Item, Item> lanes(int lanes, int maxBatch, GroupCommit group) {
    return new BatchLanes<>(lanes, maxBatch, Duration.ZERO, Item::key, batches, item -> item, abandoned::add, group);
  }

  private static GroupCommit waitingUpToAMinute(int fill) {
    return GroupCommit.startingAt(fill, Duration.ofMinutes(1));
  }

  private void submit(BatchLanes<Item, Item> lanes, String key, int n) {
    lanes.submit(new Item(key, n)).subscribe(results::add);
  }

  @Test
  void aLoneItemStartsAtOnce() {
    BatchLanes<Item, Item> lanes = lanes(4, 8, waitingUpToAMinute(8));
    submit(lanes, "a", 1);
    assertThat(batches.formed).containsExactly(List.of(new Item("a", 1)));
  }

  @Test
  void itemsThatArriveWhileABatchRunsWaitForItsCommitAndGoInOneBatch() {
    BatchLanes<Item, Item> lanes = lanes(4, 8, waitingUpToAMinute(8));
    submit(lanes, "a", 1);
    submit(lanes, "b", 1);
    submit(lanes, "c", 1);
    submit(lanes, "a", 2);
    assertThat(batches.formed).as("three idle lanes, and none starts a small batch while one is in flight").hasSize(1);
    batches.release(0);
    assertThat(batches.formed).hasSize(2);
    assertThat(batches.formed.get(1)).containsExactly(new Item("b", 1), new Item("c", 1), new Item("a", 2));
    batches.release(1);
    assertThat(results).containsExactly(new Item("a", 1), new Item("b", 1), new Item("c", 1), new Item("a", 2));
    assertThat(abandoned).isEmpty();
  }

  @Test
  void aFullBatchStartsBesideABatchInFlight() {
    BatchLanes<Item, Item> lanes = lanes(4, 3, waitingUpToAMinute(3));
    submit(lanes, "x", 1);
    submit(lanes, "a", 1);
    submit(lanes, "b", 1);
    assertThat(batches.formed).as("two items wait").hasSize(1);
    submit(lanes, "c", 1); // three now: a full batch
    assertThat(batches.formed).hasSize(2);
    assertThat(batches.formed.get(1)).containsExactly(new Item("a", 1), new Item("b", 1), new Item("c", 1));
  }

  @Test
  void theItemsOfAKeyClaimedByAWaitingLaneAreTakenByTheLaneThatCommits() {
    BatchLanes<Item, Item> lanes = lanes(2, 8, waitingUpToAMinute(8));
    submit(lanes, "a", 1); // lane 0
    submit(lanes, "b", 1); // waits
    batches.release(0); // lane 0 takes b
    submit(lanes, "b", 2); // b runs on lane 0: queued there
    submit(lanes, "c", 1); // waits
    assertThat(batches.formed).hasSize(2);
    batches.release(1);
    assertThat(batches.formed.get(2)).containsExactly(new Item("b", 2), new Item("c", 1));
    batches.release(2);
    assertThat(results).containsExactly(new Item("a", 1), new Item("b", 1), new Item("b", 2), new Item("c", 1));
  }

  @Test
  void aSlowBatchHoldsTheOthersBackOnlyForTheBoundedWait() {
    BatchLanes<Item, Item> lanes = lanes(2, 8, GroupCommit.startingAt(8, Duration.ofMillis(20)));
    submit(lanes, "slow", 1); // never released until the end
    submit(lanes, "a", 1);
    await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(batches.formed).hasSize(2));
    assertThat(batches.formed.get(1)).containsExactly(new Item("a", 1));
    batches.release(1);
    batches.release(0);
    assertThat(results).containsExactlyInAnyOrder(new Item("slow", 1), new Item("a", 1));
  }

  @Test
  void disposingAbandonsTheItemsThatWait() {
    BatchLanes<Item, Item> lanes = lanes(2, 8, waitingUpToAMinute(8));
    submit(lanes, "a", 1);
    submit(lanes, "b", 1);
    submit(lanes, "c", 1);
    lanes.dispose(); // the running batch is cancelled (its transaction rolls back); the waiting items are abandoned
    assertThat(abandoned).containsExactlyInAnyOrder(new Item("b", 1), new Item("c", 1));
    assertThat(results).isEmpty();
  }

  @Test
  void underConcurrencyEveryItemEndsOnceInItsKeysOrder() {
    int lanesCount = 4;
    AtomicInteger running = new AtomicInteger();
    AtomicInteger mostRunning = new AtomicInteger();
    AtomicInteger formed = new AtomicInteger();
    Map<String, List<Integer>> processed = new ConcurrentHashMap<>();
    BiFunction<List<Item>, LaneControl<Item, Item>, Flux<Item>> processor = (items, lane) -> Flux.defer(() -> {
      mostRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
      formed.incrementAndGet();
      for (Item item : items) {
        processed.computeIfAbsent(String.valueOf(item.key()), k -> new CopyOnWriteArrayList<>()).add(item.n());
      }
      return Mono.delay(Duration.ofNanos(ThreadLocalRandom.current().nextInt(200_000)), Schedulers.parallel())
          .thenMany(Flux.fromIterable(items))
          .doOnTerminate(running::decrementAndGet);
    });
    BatchLanes<Item, Item> lanes = new BatchLanes<>(lanesCount, 8, Duration.ZERO, Item::key, processor, item -> item,
        abandoned::add, GroupCommit.startingAt(8));
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
