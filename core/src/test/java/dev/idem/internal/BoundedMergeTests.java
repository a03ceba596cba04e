package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;
import reactor.test.publisher.TestPublisher;

class BoundedMergeTests {

  @Test
  void emitsEveryValueAndSkipsEmptySteps() {
    StepVerifier.create(BoundedMerge.merge(Flux.range(1, 1000), i -> i % 3 == 0 ? Mono.<Integer>empty() : Mono.just(i), 7)
        .collectList())
        .assertNext(values -> assertThat(values).hasSize(667).doesNotContain(3, 6, 999).contains(1, 2, 1000))
        .verifyComplete();
  }

  @Test
  void neverHasMoreThanTheLimitRequestedAndNotDone() {
    TestPublisher<Integer> items = TestPublisher.createCold();
    for (int i = 0; i < 20; i++) {
      items.next(i);
    }
    items.complete();
    List<Sinks.One<Integer>> steps = new ArrayList<>();
    StepVerifier.create(BoundedMerge.merge(items.flux(), i -> {
      Sinks.One<Integer> step = Sinks.one();
      steps.add(step);
      return step.asMono();
    }, 5), 0)
        .then(() -> assertThat(steps).as("steps started with no demand downstream").hasSize(5))
        .then(() -> steps.get(0).tryEmitEmpty())
        .then(() -> assertThat(steps).as("an empty step frees its place").hasSize(6))
        .then(() -> steps.get(1).tryEmitValue(1))
        .then(() -> assertThat(steps).as("a value waiting for demand holds its place").hasSize(6))
        .thenRequest(1)
        .expectNext(1)
        .then(() -> assertThat(steps).as("a delivered value frees its place").hasSize(7))
        .thenCancel()
        .verify(Duration.ofSeconds(5));
  }

  @Test
  void aStepsErrorEndsTheStreamAndCancelsTheOthers() {
    AtomicBoolean otherCancelled = new AtomicBoolean();
    AtomicBoolean upstreamCancelled = new AtomicBoolean();
    Flux<Integer> items = Flux.range(0, 100).doOnCancel(() -> upstreamCancelled.set(true));
    StepVerifier.create(BoundedMerge.merge(items, i -> i == 0
        ? Mono.<Integer>never().doOnCancel(() -> otherCancelled.set(true))
        : i == 1 ? Mono.<Integer>error(new IllegalStateException("boom")) : Mono.<Integer>never(), 4))
        .expectErrorMessage("boom")
        .verify(Duration.ofSeconds(5));
    assertThat(otherCancelled).isTrue();
    assertThat(upstreamCancelled).isTrue();
  }

  @Test
  void aThrowingStepAndAnUpstreamErrorEndTheStream() {
    StepVerifier.create(BoundedMerge.merge(Flux.range(0, 10), i -> {
      throw new IllegalArgumentException("bad step");
    }, 4)).expectErrorMessage("bad step").verify(Duration.ofSeconds(5));
    StepVerifier
        .create(BoundedMerge.merge(Flux.concat(Flux.just(1), Flux.error(new IllegalStateException("upstream"))), Mono::just, 4))
        .expectNext(1)
        .expectErrorMessage("upstream")
        .verify(Duration.ofSeconds(5));
  }

  @Test
  void cancellingCancelsTheRunningSteps() {
    AtomicInteger cancelled = new AtomicInteger();
    StepVerifier
        .create(BoundedMerge.merge(Flux.range(0, 100), i -> Mono.<Integer>never().doOnCancel(cancelled::incrementAndGet), 8))
        .thenAwait(Duration.ofMillis(10))
        .thenCancel()
        .verify(Duration.ofSeconds(5));
    assertThat(cancelled).hasValue(8);
  }

  @Test
  void completesOnlyAfterTheLastStep() {
    Sinks.One<Integer> last = Sinks.one();
    StepVerifier.create(BoundedMerge.merge(Flux.just(1, 2), i -> i == 1 ? Mono.just(1) : last.asMono(), 4))
        .expectNext(1)
        .expectNoEvent(Duration.ofMillis(50))
        .then(() -> last.tryEmitValue(2))
        .expectNext(2)
        .verifyComplete();
  }

  @Test
  void rejectsALimitBelowOne() {
    assertThatThrownBy(() -> BoundedMerge.merge(Flux.just(1), Mono::just, 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("limit");
  }

  /**
   * Steps completing on many threads at once: every value arrives once, no more than the limit
   * run, and the stream is never asked for more by two threads at once (Reactive Streams rule 2.7).
   */
  @RepeatedTest(50)
  void concurrentCompletionsDeliverEachValueOnceWithinTheLimit() {
    int limit = 16;
    AtomicInteger inFlight = new AtomicInteger();
    AtomicInteger maxInFlight = new AtomicInteger();
    AtomicInteger requesting = new AtomicInteger();
    AtomicBoolean concurrentRequest = new AtomicBoolean();
    ConcurrentHashMap<Integer, Boolean> seen = new ConcurrentHashMap<>();
    Flux<Integer> items = Flux.range(0, 5000).doOnNext(i -> maxInFlight.accumulateAndGet(inFlight.incrementAndGet(), Math::max));
    Flux<Integer> watched = Flux.from(subscriber -> items.subscribe(new org.reactivestreams.Subscriber<Integer>() {
      @Override
      public void onSubscribe(org.reactivestreams.Subscription s) {
        subscriber.onSubscribe(new org.reactivestreams.Subscription() {
          @Override
          public void request(long n) {
            if (requesting.incrementAndGet() > 1) {
              concurrentRequest.set(true);
            }
            try {
              Thread.onSpinWait();
              s.request(n);
            } finally {
              requesting.decrementAndGet();
            }
          }

          @Override
          public void cancel() {
            s.cancel();
          }
        });
      }

      @Override
      public void onNext(Integer item) {
        subscriber.onNext(item);
      }

      @Override
      public void onError(Throwable error) {
        subscriber.onError(error);
      }

      @Override
      public void onComplete() {
        subscriber.onComplete();
      }
    }));
    Flux<Integer> merged = BoundedMerge.merge(watched,
        i -> Mono.fromCallable(() -> i).subscribeOn(Schedulers.parallel()).filter(v -> v % 5 != 0)
            .doOnSuccess(v -> inFlight.decrementAndGet()),
        limit);
    StepVerifier.create(merged.doOnNext(v -> assertThat(seen.put(v, true)).isNull()).count())
        .expectNext(4000L)
        .verifyComplete();
    assertThat(maxInFlight.get()).isLessThanOrEqualTo(limit);
    assertThat(concurrentRequest).as("requests passed on one at a time").isFalse();
  }
}
