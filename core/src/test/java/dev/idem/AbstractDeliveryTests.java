package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.testing.TestDelivery;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.test.StepVerifier;

class AbstractDeliveryTests {

  /** A delivery whose settlements run the given actions and are counted. */
  private static class CountingDelivery extends AbstractDelivery<String> {
    final AtomicInteger acks = new AtomicInteger();
    final AtomicInteger deadLetters = new AtomicInteger();
    private final java.util.function.IntFunction<Mono<Void>> deadLetterOutcome;

    CountingDelivery() {
      this(call -> Mono.empty());
    }

    CountingDelivery(java.util.function.IntFunction<Mono<Void>> deadLetterOutcome) {
      this.deadLetterOutcome = deadLetterOutcome;
    }

    @Override
    public String id() {
      return "id";
    }

    @Override
    public String payload() {
      return "p";
    }

    @Override
    protected Mono<Void> doAck() {
      return Mono.fromRunnable(acks::incrementAndGet);
    }

    @Override
    protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
      return Mono.defer(() -> deadLetterOutcome.apply(deadLetters.incrementAndGet()));
    }
  }

  /** A counting delivery that acknowledges in place too; the first {@code failures} acks in place throw. */
  private static final class InPlaceDelivery extends CountingDelivery {
    final AtomicInteger inPlace = new AtomicInteger();
    private final int failures;

    InPlaceDelivery(int failures) {
      this.failures = failures;
    }

    @Override
    protected boolean acksInPlace() {
      return true;
    }

    @Override
    protected void doAckInPlace() {
      if (inPlace.incrementAndGet() <= failures) {
        throw new IllegalStateException("partition revoked");
      }
    }
  }

  @Test
  void anAckInPlaceIsTheOneSettlementThatLaterCallsShare() {
    InPlaceDelivery delivery = new InPlaceDelivery(0);

    assertThat(delivery.ackInPlace()).isTrue();
    assertThat(delivery.isSettled()).isTrue();
    assertThat(delivery.ackInPlace()).as("once only").isFalse();
    StepVerifier.create(delivery.ack()).verifyComplete();
    StepVerifier.create(delivery.deadLetter(DeadLetter.rejected(DeadLetterReason.MISSING_ID, "test", "c"))).verifyComplete();

    assertThat(delivery.inPlace.get()).isEqualTo(1);
    assertThat(delivery.acks.get()).as("doAck never ran").isZero();
    assertThat(delivery.deadLetters.get()).isZero();
  }

  @Test
  void anAckInPlaceThatThrowsIsForgottenSoALaterAckTriesAgain() {
    InPlaceDelivery delivery = new InPlaceDelivery(1);

    assertThatThrownBy(delivery::ackInPlace).hasMessage("partition revoked");
    assertThat(delivery.isSettled()).isFalse();
    StepVerifier.create(delivery.ack()).verifyComplete();

    assertThat(delivery.acks.get()).isEqualTo(1);
    assertThat(delivery.isSettled()).isTrue();
  }

  @Test
  void aSettlementAskedForDuringAnAckInPlaceWaitsForItsEnd() throws Exception {
    java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    CountingDelivery delivery = new CountingDelivery() {
      @Override
      protected boolean acksInPlace() {
        return true;
      }

      @Override
      protected void doAckInPlace() {
        inside.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        throw new IllegalStateException("partition revoked");
      }
    };
    java.util.concurrent.CompletableFuture<Boolean> inPlace = java.util.concurrent.CompletableFuture
        .supplyAsync(delivery::ackInPlace);
    assertThat(inside.await(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();

    // Each asked for on a thread of its own: the wait for the ack in place holds its thread.
    java.util.concurrent.CompletableFuture<Void> ack = delivery.ack().subscribeOn(Schedulers.boundedElastic()).toFuture();
    java.util.concurrent.CompletableFuture<Void> letter = delivery
        .deadLetter(DeadLetter.rejected(DeadLetterReason.MISSING_ID, "test", "c"))
        .subscribeOn(Schedulers.boundedElastic()).toFuture();
    org.awaitility.Awaitility.await().during(java.time.Duration.ofMillis(100)).atMost(java.time.Duration.ofSeconds(5))
        .until(() -> !ack.isDone() && !letter.isDone());
    release.countDown();

    assertThatThrownBy(inPlace::join).hasCauseInstanceOf(IllegalStateException.class);
    ack.get(10, java.util.concurrent.TimeUnit.SECONDS);
    letter.get(10, java.util.concurrent.TimeUnit.SECONDS);
    assertThat(delivery.acks.get() + delivery.deadLetters.get()).as("the failed ack in place is tried again once").isEqualTo(1);
    assertThat(delivery.isSettled()).isTrue();
  }

  @Test
  void aDeliveryThatCannotAckInPlaceOrIsSettlingAlreadyIsLeftToItsMono() {
    CountingDelivery plain = new CountingDelivery();
    assertThat(plain.ackInPlace()).isFalse();
    assertThat(plain.isSettled()).as("nothing started").isFalse();

    InPlaceDelivery settling = new InPlaceDelivery(0);
    StepVerifier.create(settling.ack()).verifyComplete();
    assertThat(settling.ackInPlace()).isFalse();
    assertThat(settling.inPlace.get()).isZero();
    assertThat(settling.acks.get()).isEqualTo(1);
  }

  @Test
  void settlementRunsOnceWhateverIsCalledAndFromHowManyThreads() {
    CountingDelivery delivery = new CountingDelivery();
    DeadLetter letter = DeadLetter.rejected(DeadLetterReason.MISSING_ID, "test", "c");

    Flux.range(0, 64)
        .parallel(4).runOn(Schedulers.parallel())
        .flatMap(i -> i % 2 == 0 ? delivery.ack() : delivery.deadLetter(letter))
        .sequential().blockLast();

    assertThat(delivery.acks.get() + delivery.deadLetters.get()).isEqualTo(1);
    assertThat(delivery.isSettled()).isTrue();
  }

  @Test
  void aFailedSettlementIsForgottenSoALaterCallTriesAgain() {
    CountingDelivery flaky = new CountingDelivery(
        call -> call == 1 ? Mono.error(new java.io.IOException("broker away")) : Mono.empty());
    DeadLetter letter = DeadLetter.rejected(DeadLetterReason.MISSING_ID, "test", "c");

    StepVerifier.create(flaky.deadLetter(letter)).expectErrorMessage("broker away").verify();
    assertThat(flaky.isSettled()).isFalse();
    StepVerifier.create(flaky.deadLetter(letter)).verifyComplete();
    StepVerifier.create(flaky.deadLetter(letter)).verifyComplete();
    assertThat(flaky.deadLetters.get()).isEqualTo(2);
    assertThat(flaky.isSettled()).isTrue();
  }

  @Test
  void anAckThatKeepsFailingNeverReachesTheBroker() {
    TestDelivery<String> lost = TestDelivery.of("id", "p").withLostAck();
    StepVerifier.create(lost.ack()).expectErrorMessage("simulated crash between commit and ack").verify();
    StepVerifier.create(lost.ack()).expectErrorMessage("simulated crash between commit and ack").verify();
    assertThat(lost.ackCount()).isZero();
  }
}
