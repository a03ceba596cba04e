package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

/**
 * The share loop's bookkeeping of held records through a renewal, as the kafka-clients 4.2 client
 * behaves (a renewed record leaves the poll and comes back in a later one with the same delivery
 * count); the loop itself is proved on the real broker by the share suite. (Not compiled on
 * kafka-clients 3.9, whose records carry no delivery count.)
 */
class HeldRecordsTests {

  private final HeldRecords held = new HeldRecords();

  @Test
  void aRenewedRecordIsNotHandedOutAgainWhenItComesBackAndItsWaitingSettlementIsAppliedThen() {
    ConsumerRecord<byte[], byte[]> first = record(7, 1);
    assertThat(held.absorb(List.of(first), 0).fresh()).containsExactly(first);
    HeldRecords.Held h = held.get(first);
    assertThat(held.anyAcquired()).isTrue();

    held.renewing(h, 100);
    assertThat(held.anyAcquired()).as("a renewing record does not hold the next poll back").isFalse();
    assertThat(held.anyRenewing()).isTrue();
    ShareSettlement accept = settlement(first);
    held.await(h, accept);

    ConsumerRecord<byte[], byte[]> back = record(7, 1);
    HeldRecords.Polled polled = held.absorb(List.of(back), 200);
    assertThat(polled.fresh()).as("not a new delivery").isEmpty();
    assertThat(polled.returned()).containsExactly(h);
    assertThat(h.record()).isSameAs(back);
    assertThat(h.state()).isEqualTo(HeldRecords.State.ACQUIRED);
    assertThat(h.lockedAt()).isEqualTo(200);
    assertThat(held.takeWaiting(h)).isSameAs(accept);
  }

  @Test
  void aRenewingRecordDeliveredAgainWithAHigherCountLostItsLockAndTheNewDeliveryIsFresh() {
    ConsumerRecord<byte[], byte[]> first = record(3, 1);
    held.absorb(List.of(first), 0);
    HeldRecords.Held h = held.get(first);
    held.renewing(h, 10);

    ConsumerRecord<byte[], byte[]> again = record(3, 2);
    HeldRecords.Polled polled = held.absorb(List.of(again), 20);
    assertThat(polled.lost()).containsExactly(h);
    assertThat(polled.fresh()).containsExactly(again);
    assertThat(held.get(first)).as("a settlement of the old delivery means nothing now").isNull();
    assertThat(held.get(again)).isNotNull();
  }

  @Test
  void theLoopMayPollOnlyOnceTheBrokerHasAnsweredEveryRenewalItSent() {
    ConsumerRecord<byte[], byte[]> a = record(1, 1);
    ConsumerRecord<byte[], byte[]> b = record(2, 1);
    held.absorb(List.of(a, b), 0);
    assertThat(held.anyUnanswered()).as("nothing renewing").isFalse();
    held.renewing(held.get(a), 5);
    held.renewing(held.get(b), 5);
    assertThat(held.anyUnanswered()).isTrue();

    assertThat(held.answered("t", 1, List.of(1L))).as("another partition").isEmpty();
    assertThat(held.answered("t", 0, List.of(1L, 9L))).extracting(HeldRecords.Held::record).containsExactly(a);
    assertThat(held.anyUnanswered()).as("b's answer is still out").isTrue();
    assertThat(held.answered("t", 0, List.of(1L, 2L))).as("a is answered once").extracting(HeldRecords.Held::record)
        .containsExactly(b);
    assertThat(held.anyUnanswered()).isFalse();

    held.absorb(List.of(record(1, 1), record(2, 1)), 10);
    held.renewing(held.get(a), 20);
    assertThat(held.anyUnanswered()).as("a second renewal waits for its own answer").isTrue();
    assertThat(held.answered("t", 0, List.of(2L))).as("b is acquired, not renewing").isEmpty();
  }

  @Test
  void aRenewalGivenUpAtTheLockIsStillAwaitedUntilTheBrokerAnswersOrTheLastResortPasses() {
    ConsumerRecord<byte[], byte[]> a = record(1, 1);
    ConsumerRecord<byte[], byte[]> b = record(2, 1);
    held.absorb(List.of(a, b), 0);
    held.renewing(held.get(a), 100);
    held.renewing(held.get(b), 300);
    assertThat(held.dropOverdue(1_250, 1_000)).extracting(HeldRecords.Held::record).containsExactly(a);
    assertThat(held.anyUnanswered()).as("the client keeps a's renewal until the broker answers").isTrue();
    assertThat(held.answered("t", 0, List.of(1L))).as("a was given up").isEmpty();
    assertThat(held.forgetUnansweredSentBefore(200)).isZero();
    assertThat(held.forgetUnansweredSentBefore(301)).isOne();
    assertThat(held.anyUnanswered()).isFalse();
  }

  @Test
  void aRenewalThatDoesNotComeBackWithinTheLockIsDropped() {
    ConsumerRecord<byte[], byte[]> record = record(5, 1);
    held.absorb(List.of(record), 0);
    held.renewing(held.get(record), 1_000);
    assertThat(held.dropOverdue(1_500, 1_000)).isEmpty();
    assertThat(held.dropOverdue(2_001, 1_000)).hasSize(1);
    assertThat(held.isEmpty()).isTrue();
  }

  @Test
  void onAStopOnlyAcquiredRecordsCanBeReleased() {
    ConsumerRecord<byte[], byte[]> a = record(1, 1);
    ConsumerRecord<byte[], byte[]> b = record(2, 1);
    held.absorb(List.of(a, b), 0);
    held.renewing(held.get(b), 5);
    assertThat(held.acquired()).extracting(HeldRecords.Held::record).containsExactly(a);
    assertThat(held.oldestAcquired().record()).isSameAs(a);
    assertThat(held.clear()).hasSize(2);
  }

  private static ConsumerRecord<byte[], byte[]> record(long offset, int deliveryCount) {
    return new ConsumerRecord<>("t", 0, offset, 0L, TimestampType.CREATE_TIME, 0, 0, new byte[0], new byte[0],
        new RecordHeaders(),
        Optional.empty(), Optional.of((short) deliveryCount));
  }

  private static ShareSettlement settlement(ConsumerRecord<byte[], byte[]> record) {
    return new ShareSettlement(record, AcknowledgeType.ACCEPT, null);
  }
}
