package dev.idem.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The median of a row's rounds, and the table's ratio columns. */
class RowResultTests {

  private static RowResult row(String id, RowResult.Kind kind, long messagesPerSecond, String... failures) {
    return new RowResult("kafka", id, "row " + id, kind, messagesPerSecond, 1_000_000_000L, 1_000_000L, List.of(failures));
  }

  @Test
  void aRowOfThreeRoundsReportsTheMiddleRateAndEveryRound() {
    RowResult median = RowResult.median(List.of(row("4d", RowResult.Kind.IDEM, 30_000), row("4d", RowResult.Kind.IDEM, 10_000),
        row("4d", RowResult.Kind.IDEM, 20_000)));
    assertThat(median.messagesPerSecond()).isEqualTo(20_000);
    assertThat(median.name()).isEqualTo("row 4d [median of 3 rounds: 30,000 / 10,000 / 20,000 msg/s]");
    assertThat(median.ok()).isTrue();
  }

  @Test
  void aFailedRoundFailsTheRowAndCountsAsTheSlowest() {
    RowResult median = RowResult.median(List.of(row("3", RowResult.Kind.JDBC_POLL, 30_000, "2 balances wrong"),
        row("3", RowResult.Kind.JDBC_POLL, 10_000), row("3", RowResult.Kind.JDBC_POLL, 20_000)));
    assertThat(median.messagesPerSecond()).isEqualTo(10_000);
    assertThat(median.failures()).containsExactly("2 balances wrong");
  }

  @Test
  void theTableGivesIdemRowsTheirRatiosAndLeavesOutTheColumnsOfPeersThatDidNotRun() {
    String table = ResultTable
        .format(List.of(row("0", RowResult.Kind.DATABASE, 80_000), row("3", RowResult.Kind.JDBC_POLL, 40_000),
            row("4d", RowResult.Kind.IDEM, 60_000)));
    assertThat(table.lines().findFirst().orElseThrow()).contains("x database").contains("x JDBC tx/poll")
        .doesNotContain("x broker").doesNotContain("x JDBC tx/msg").doesNotContain("x Reactor Kafka");
    assertThat(table).containsPattern("4d row 4d +\\| +60,000 \\| +0\\.75 \\| +1\\.50 \\|");
  }

  @Test
  void idemRowsShowTheirMeanBatchTransactionsPerSecondAckFramesAndBrokerCpuAndTheColumnsGoWhenNoRowHasThem() {
    RowResult idem = new RowResult("rabbit", "4d", "row 4d", RowResult.Kind.IDEM, 60_000, 2_000_000_000L, 1_000_000L, List.of(),
        1_000, 3_000_000_000L,
        1_200, 6_000_000_000L);
    assertThat(idem.meanBatch()).isEqualTo(60.0);
    assertThat(idem.transactionsPerSecond()).isEqualTo(500.0);
    assertThat(idem.brokerCpuSecondsPerThousand()).isEqualTo(0.05);
    assertThat(idem.settleFramesPerThousand()).isEqualTo(20.0);
    assertThat(idem.databaseCpuSecondsPerThousand()).isEqualTo(0.1);
    assertThat(ResultTable.format(List.of(row("3", RowResult.Kind.JDBC_POLL, 40_000), idem)))
        .contains("| mean batch |").contains("| ack frames/1k msg |")
        .containsPattern("\\|\\s+60\\.0 \\|\\s+500 \\|\\s+20 \\|\\s+0\\.000 \\|\\s+0\\.050 \\|\\s+0\\.100 \\|");
    assertThat(ResultTable.format(List.of(row("3", RowResult.Kind.JDBC_POLL, 40_000)))).doesNotContain("mean batch")
        .doesNotContain("broker CPU")
        .doesNotContain("ack frames").doesNotContain("database CPU");
  }
}
