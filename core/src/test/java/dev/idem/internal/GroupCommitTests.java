package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The group-commit policy alone: when a lane starts, and how long its items may wait. */
class GroupCommitTests {

  private static final long MS = 1_000_000L;

  @Test
  void aSmallBatchWaitsForTheBatchInFlightUpToTheBoundHoweverFastBatchesCommit() {
    GroupCommit group = GroupCommit.startingAt(128);
    for (int i = 0; i < 100; i++) { // many fast batches: they do not shorten the wait
      group.started();
      group.ended();
    }
    group.started();
    long since = 1_000 * MS;
    assertThat(group.waitNanos(10, since, since)).isEqualTo(GroupCommit.MAX_WAIT.toNanos());
    assertThat(group.waitNanos(10, since, since + 30 * MS)).isEqualTo(20 * MS);
    assertThat(group.waitNanos(10, since, since + 50 * MS)).as("waited the bound: starts").isZero();
  }

  @Test
  void aFullBatchOrNothingInFlightStartsAtOnce() {
    GroupCommit group = GroupCommit.startingAt(128);
    assertThat(group.waitNanos(1, 0, 0)).as("nothing in flight").isZero();
    group.started();
    assertThat(group.waitNanos(128, 0, 0)).as("full").isZero();
    assertThat(group.waitNanos(127, 0, 0)).isPositive();
    group.ended();
    assertThat(group.waitNanos(127, 0, 0)).as("the batch in flight committed").isZero();
    assertThat(group.inFlight()).isZero();
  }

  @Test
  void offNeverWaits() {
    GroupCommit.OFF.started();
    try {
      assertThat(GroupCommit.OFF.waitNanos(1, 0, 0)).isZero();
    } finally {
      GroupCommit.OFF.ended();
    }
  }

  @Test
  void refusesAFillBelowTwoAndANegativeBound() {
    assertThatThrownBy(() -> GroupCommit.startingAt(1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fill");
    assertThatThrownBy(() -> GroupCommit.startingAt(2, Duration.ofMillis(-1))).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxWait");
  }
}
