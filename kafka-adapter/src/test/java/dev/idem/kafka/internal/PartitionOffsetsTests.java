package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class PartitionOffsetsTests {

  private final PartitionOffsets offsets = new PartitionOffsets(new TopicPartition("orders", 0));

  @Test
  void theWatermarkIsTheFirstUnsettledOffsetWhateverOrderOffsetsSettleIn() {
    assertThat(offsets.watermark()).isEqualTo(-1);
    for (long o : new long[]{10, 11, 13, 14}) {
      offsets.handedOut(o);
    }
    assertThat(offsets.watermark()).isEqualTo(10);
    assertThat(offsets.settle(13)).isTrue();
    assertThat(offsets.settle(11)).isTrue();
    assertThat(offsets.watermark()).isEqualTo(10);
    assertThat(offsets.deferred()).isEqualTo(2);
    assertThat(offsets.settle(10)).isTrue();
    assertThat(offsets.watermark()).as("10, 11 and 13 settled; 14 (after the gap at 12) not").isEqualTo(14);
    assertThat(offsets.deferred()).isZero();
    assertThat(offsets.settle(14)).isTrue();
    assertThat(offsets.watermark()).isEqualTo(15);
    assertThat(offsets.unsettled()).isZero();
  }

  @Test
  void settlingTwiceOrAnUnknownOffsetChangesNothing() {
    offsets.handedOut(5);
    offsets.handedOut(6);
    assertThat(offsets.settle(6)).isTrue();
    assertThat(offsets.settle(6)).isFalse();
    assertThat(offsets.settle(7)).isFalse();
    assertThat(offsets.settle(4)).isFalse();
    assertThat(offsets.unsettled()).isEqualTo(1);
    assertThat(offsets.watermark()).isEqualTo(5);
  }

  @Test
  void aClosedPartitionIgnoresSettlements() {
    offsets.handedOut(0);
    offsets.close();
    assertThat(offsets.settle(0)).isFalse();
    assertThat(offsets.watermark()).isZero();
  }

  @Test
  void commitsAskOnlyForProgressAndAFailedCommitIsAskedAgain() {
    offsets.handedOut(0);
    offsets.handedOut(1);
    assertThat(offsets.toCommit()).isEqualTo(0);
    offsets.commitRequested(0);
    assertThat(offsets.toCommit()).isEqualTo(-1);
    offsets.settle(0);
    assertThat(offsets.toCommit()).isEqualTo(1);
    offsets.commitRequested(1);
    offsets.commitFailed();
    assertThat(offsets.toCommit()).as("nothing was confirmed, so 1 is asked again").isEqualTo(1);
    offsets.commitRequested(1);
    offsets.committed(1);
    offsets.commitFailed();
    assertThat(offsets.toCommit()).isEqualTo(-1);
  }

  @Test
  void manyOffsetsSettledInRandomOrderGrowTheRingAndEndAtTheOffsetAfterTheLast() {
    List<Long> handed = new ArrayList<>();
    for (long o = 1_000; o < 6_000; o += 1 + (o % 3)) {
      offsets.handedOut(o);
      handed.add(o);
    }
    List<Long> shuffled = new ArrayList<>(handed);
    Collections.shuffle(shuffled, new Random(42));
    long lowestUnsettled = handed.get(0);
    java.util.TreeSet<Long> open = new java.util.TreeSet<>(handed);
    for (long o : shuffled) {
      assertThat(offsets.settle(o)).isTrue();
      open.remove(o);
      lowestUnsettled = open.isEmpty() ? handed.get(handed.size() - 1) + 1 : open.first();
      assertThat(offsets.watermark()).isEqualTo(lowestUnsettled);
    }
    assertThat(offsets.deferred()).isZero();
  }
}
