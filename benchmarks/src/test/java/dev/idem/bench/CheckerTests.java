package dev.idem.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The workload generator, the correctness check and the table, without any service. */
class CheckerTests {

  private final Workload workload = Workload.generate(1_000, 0.05, 10, 7);

  @Test
  void workloadRepeatsFivePercentOfIdsAfterTheirOriginal() {
    assertThat(workload.distinct()).isEqualTo(1_000);
    assertThat(workload.duplicates()).isEqualTo(50);
    assertThat(workload.total()).isEqualTo(1_050);
    Map<Integer, Integer> firstPosition = new HashMap<>();
    for (int position = 0; position < workload.total(); position++) {
      int event = workload.eventAt(position);
      Integer first = firstPosition.putIfAbsent(event, position);
      if (first != null) {
        assertThat(position - first).as("a duplicate comes after its original").isPositive();
      }
    }
    assertThat(firstPosition).hasSize(1_000);
    long expectedTotal = 0;
    for (int account = 1; account <= 10; account++) {
      expectedTotal += workload.expectedBalance(account);
    }
    long sum = 0;
    for (int event = 0; event < 1_000; event++) {
      sum += workload.amount(event);
    }
    assertThat(expectedTotal).isEqualTo(sum);
  }

  @Test
  void aCorrectRowPasses() {
    assertThat(Checker.failures(workload, correct())).isEmpty();
  }

  @Test
  void anEffectAppliedTwiceFails() {
    Checker.Observation right = correct();
    Map<Integer, Long> balances = new HashMap<>(right.balances());
    balances.merge(3, 1L, Long::sum);
    Checker.Observation twice = new Checker.Observation(right.settled(), right.effects() + 1, right.duplicates() - 1, 0, -1,
        right.dedupRows(), balances, true, null);
    assertThat(Checker.failures(workload, twice))
        .anySatisfy(f -> assertThat(f).contains("1001 effects applied for 1000 distinct ids"))
        .anySatisfy(f -> assertThat(f).contains("1 balances differ").contains("account 3"));
  }

  @Test
  void missingDedupRowsAndUnsettledMessagesFail() {
    Checker.Observation right = correct();
    Checker.Observation wrong = new Checker.Observation(1_049, right.effects(), right.duplicates() - 1, 0, -1, 999,
        right.balances(), false, "committed offsets {0=10}, end offsets {0=11}");
    assertThat(Checker.failures(workload, wrong)).containsExactlyInAnyOrder(
        "settled 1049 of 1050 messages",
        "999 dedup rows for 1000 distinct ids",
        "broker not drained: committed offsets {0=10}, end offsets {0=11}");
  }

  @Test
  void aBrokerOnlyRowIsCheckedByTheIdsItSaw() {
    assertThat(Checker.failures(workload, new Checker.Observation(1_050, -1, -1, 0, 1_000, -1, null, true, null))).isEmpty();
    assertThat(Checker.failures(workload, new Checker.Observation(1_050, -1, -1, 0, 990, -1, null, true, null)))
        .containsExactly("990 distinct ids received for 1000 published");
  }

  @Test
  void theTableShowsRatiosForIdemRowsAndFailuresLoudly() {
    List<RowResult> rows = List.of(
        new RowResult("kafka", "1", "broker only", RowResult.Kind.BROKER, 10_000, 100_000_000L, 50_000_000L, List.of()),
        new RowResult("kafka", "2", "JDBC per message", RowResult.Kind.JDBC_MESSAGE, 1_000, 1_000_000_000L, 500_000_000L,
            List.of()),
        new RowResult("kafka", "3", "JDBC per poll", RowResult.Kind.JDBC_POLL, 5_000, 1_000_000_000L, 100_000_000L, List.of()),
        new RowResult("kafka", "4b", "Idem", RowResult.Kind.IDEM, 2_000, 1_000_000_000L, 1_000_000_000L, List.of()),
        RowResult.failed("kafka", "5a", "Idem batch", RowResult.Kind.IDEM, "3 balances differ"));
    String table = ResultTable.format(rows);
    assertThat(table.lines().toList()).hasSize(7);
    assertThat(table).contains("| kafka  | 4b Idem")
        .contains("|   2,000 |     0.02 |          2.00 |           0.40 |        0.500 | ok ");
    assertThat(table).contains("| 100,000 |").contains("FAILED: 3 balances differ");
    assertThat(table.lines().map(String::length).distinct().count()).as("aligned columns").isEqualTo(1);
  }

  @Test
  void rowsOnBothKafkaEnginesGetTheNativeOverReactorKafkaColumn() {
    List<RowResult> rows = List.of(
        new RowResult("kafka", "1", "broker only", RowResult.Kind.BROKER, 10_000, 100_000_000L, 50_000_000L, List.of()),
        new RowResult("kafka", "1b", "adapter only", RowResult.Kind.ADAPTER, 9_000, 100_000_000L, 50_000_000L, List.of()),
        new RowResult("kafka", "1b-rk", "adapter only (Reactor Kafka)", RowResult.Kind.ADAPTER, 6_000, 100_000_000L, 50_000_000L,
            List.of()),
        new RowResult("kafka", "4b", "Idem", RowResult.Kind.IDEM, 2_000, 1_000_000_000L, 1_000_000_000L, List.of()),
        RowResult.failed("kafka", "4b-rk", "Idem (Reactor Kafka)", RowResult.Kind.IDEM, "stalled"));
    String table = ResultTable.format(rows);
    assertThat(table.lines().findFirst().orElseThrow()).contains("| x Reactor Kafka |");
    // The JDBC loops did not run: their columns are left out.
    assertThat(table.lines().findFirst().orElseThrow()).doesNotContain("x JDBC");
    assertThat(table).contains("| 1b adapter only ").contains("|     0.90 |            1.50 |");
    assertThat(table).contains("| 1b-rk adapter only (Reactor Kafka) ").contains("|     0.60 |                 |");
    assertThat(table).contains("| 4b Idem ").contains("|               - |");
    assertThat(table.lines().map(String::length).distinct().count()).as("aligned columns").isEqualTo(1);
    assertThat(ResultTable.format(rows.subList(0, 2))).doesNotContain("Reactor Kafka");
  }

  private Checker.Observation correct() {
    Map<Integer, Long> balances = new HashMap<>();
    for (int account = 1; account <= 10; account++) {
      balances.put(account, workload.expectedBalance(account));
    }
    assertThat(Set.copyOf(balances.keySet())).hasSize(10);
    return new Checker.Observation(1_050, 1_000, 50, 0, -1, 1_000, balances, true, null);
  }
}
