package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

class TransactionGateTests {

  private final TransactionGate gate = new TransactionGate();
  private final List<String> started = new CopyOnWriteArrayList<>();

  /** Work that records its start and ends when its sink is completed. */
  private Mono<String> work(String name, Sinks.Empty<Void> end) {
    return Mono.defer(() -> {
      started.add(name);
      return end.asMono().thenReturn(name);
    });
  }

  @Test
  void workRunsSideBySideWhileNothingRunsAlone() {
    Sinks.Empty<Void> a = Sinks.empty();
    Sinks.Empty<Void> b = Sinks.empty();
    gate.run(false, work("a", a)).subscribe();
    gate.run(false, work("b", b)).subscribe();

    assertThat(started).containsExactly("a", "b");
    assertThat(gate.closed()).isFalse();
  }

  @Test
  void workThatRunsAloneWaitsForTheWorkInFlightAndHoldsBackWhatArrivesAfterIt() {
    Sinks.Empty<Void> a = Sinks.empty();
    Sinks.Empty<Void> alone = Sinks.empty();
    Sinks.Empty<Void> c = Sinks.empty();
    gate.run(false, work("a", a)).subscribe();
    gate.run(true, work("alone", alone)).subscribe();
    gate.run(false, work("c", c)).subscribe();

    assertThat(started).containsExactly("a");
    assertThat(gate.closed()).isTrue();
    a.tryEmitEmpty();
    assertThat(started).containsExactly("a", "alone");
    alone.tryEmitEmpty();
    assertThat(started).containsExactly("a", "alone", "c");
    assertThat(gate.closed()).isFalse();
  }

  @Test
  void anErrorEndsTheWorkAndOpensTheGate() {
    Sinks.Empty<Void> b = Sinks.empty();
    List<Throwable> errors = new CopyOnWriteArrayList<>();
    gate.run(true, Mono.error(new IllegalStateException("deadlock"))).subscribe(v -> {}, errors::add);
    gate.run(false, work("b", b)).subscribe();

    assertThat(errors).hasSize(1);
    assertThat(started).containsExactly("b");
  }

  @Test
  void workCancelledWhileItWaitsLeavesTheQueueAndWorkCancelledWhileItRunsLeavesTheGate() {
    Sinks.Empty<Void> a = Sinks.empty();
    Disposable running = gate.run(false, work("a", a)).subscribe();
    Disposable waiting = gate.run(true, work("alone", Sinks.empty())).subscribe();
    gate.run(false, work("c", Sinks.empty())).subscribe();

    waiting.dispose();
    assertThat(started).containsExactly("a", "c");
    running.dispose();
    gate.run(true, work("alone again", Sinks.empty())).subscribe();
    assertThat(started).as("c still runs").containsExactly("a", "c");
  }

  @Test
  void workAloneRunsOneAtATimeInArrivalOrder() {
    Sinks.Empty<Void> first = Sinks.empty();
    Sinks.Empty<Void> second = Sinks.empty();
    gate.run(true, work("first", first)).subscribe();
    gate.run(true, work("second", second)).subscribe();
    gate.run(false, work("after", Sinks.empty())).subscribe();

    assertThat(started).containsExactly("first");
    first.tryEmitEmpty();
    assertThat(started).containsExactly("first", "second");
    second.tryEmitEmpty();
    assertThat(started).containsExactly("first", "second", "after");
  }

  @Test
  void manyUnitsOnManyThreadsLeaveTheGateOpen() {
    List<Mono<Integer>> units = new java.util.ArrayList<>();
    for (int i = 0; i < 2_000; i++) {
      int n = i;
      units.add(gate.run(i % 17 == 0, Mono.delay(Duration.ofNanos(n % 3 * 1000)).thenReturn(n)));
    }
    Long count = reactor.core.publisher.Flux.merge(units).count().block(Duration.ofSeconds(30));

    assertThat(count).isEqualTo(2_000);
    assertThat(gate.closed()).isFalse();
  }
}
