package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

class KeyedLanesTests {

  @Test
  void workOfOneKeyRunsInSubscriptionOrderOthersInParallel() {
    KeyedLanes lanes = new KeyedLanes();
    List<String> log = new CopyOnWriteArrayList<>();
    // a1 is slow; a2 must wait for it, b1 must not.
    Flux<String> work = Flux.just("a1:30", "a2:1", "b1:1")
        .flatMap(spec -> {
          String name = spec.substring(0, 2);
          long delay = Long.parseLong(spec.substring(3));
          Mono<String> unit = Mono.fromRunnable(() -> log.add("start " + name))
              .then(Mono.delay(Duration.ofMillis(delay)))
              .doOnNext(x -> log.add("end " + name))
              .thenReturn(name);
          return lanes.run(name.substring(0, 1), unit);
        }, 8);

    StepVerifier.withVirtualTime(() -> work)
        .thenAwait(Duration.ofMillis(100))
        .expectNext("b1", "a1", "a2")
        .verifyComplete();

    assertThat(log.indexOf("start a2")).isGreaterThan(log.indexOf("end a1"));
    assertThat(log.indexOf("start b1")).isLessThan(log.indexOf("end a1"));
    assertThat(lanes.busyKeys()).isZero();
  }

  @Test
  void aFailingUnitReleasesItsKey() {
    KeyedLanes lanes = new KeyedLanes();
    Flux<Object> work = Flux.concat(
        lanes.run("k", Mono.error(new IllegalStateException("boom"))).onErrorResume(e -> Mono.just("recovered")),
        lanes.run("k", Mono.just("next")));
    StepVerifier.create(work).expectNext("recovered", "next").verifyComplete();
    assertThat(lanes.busyKeys()).isZero();
  }

  @Test
  void nullKeyIsNotSerialised() {
    KeyedLanes lanes = new KeyedLanes();
    StepVerifier.create(lanes.run(null, Mono.just(1))).expectNext(1).verifyComplete();
    assertThat(lanes.busyKeys()).isZero();
  }
}
