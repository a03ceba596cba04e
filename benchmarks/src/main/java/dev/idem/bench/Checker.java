package dev.idem.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Decides whether a row did its job: one effect per distinct message id and every balance equal
 * to the sum of its distinct events, nothing left unsettled on the broker. Pure: it compares
 * what the row observed with what the workload expects and lists every difference.
 */
final class Checker {

  private Checker() {}

  /**
   * What a row saw at its end.
   *
   * @param settled messages settled with the broker (acknowledged or committed)
   * @param effects effects applied (processed outcomes, or rows the JDBC loop updated); -1 when the row has no database
   * @param duplicates duplicates recognised; -1 when the row does not dedup
   * @param deadLettered dead-lettered messages
   * @param distinctIdsSeen distinct message ids the row received; -1 when not tracked
   * @param dedupRows rows in the dedup table; -1 when the row has no database
   * @param balances account id to balance; {@code null} when the row has no database
   * @param brokerDrained whether the broker has nothing left for the consumer (committed offsets at the end, queue empty)
   * @param brokerDetail what the broker check saw, for the report
   */
  record Observation(long settled, long effects, long duplicates, long deadLettered, long distinctIdsSeen,
      long dedupRows, Map<Integer, Long> balances, boolean brokerDrained, String brokerDetail) {}

  /**
   * Every way the observation differs from the workload; empty when the row is correct.
   *
   * @param workload what was published
   * @param seen what the row observed
   * @return the failures, each a sentence
   */
  static List<String> failures(Workload workload, Observation seen) {
    List<String> failures = new ArrayList<>();
    if (seen.settled() < workload.total()) {
      failures.add("settled " + seen.settled() + " of " + workload.total() + " messages");
    }
    if (seen.deadLettered() != 0) {
      failures.add(seen.deadLettered() + " messages dead-lettered");
    }
    if (seen.effects() >= 0 && seen.effects() != workload.distinct()) {
      failures.add(seen.effects() + " effects applied for " + workload.distinct() + " distinct ids");
    }
    if (seen.duplicates() >= 0 && seen.effects() >= 0 && seen.effects() + seen.duplicates() != seen.settled()) {
      failures.add(seen.effects() + " effects + " + seen.duplicates() + " duplicates != " + seen.settled() + " settled");
    }
    if (seen.distinctIdsSeen() >= 0 && seen.distinctIdsSeen() != workload.distinct()) {
      failures.add(seen.distinctIdsSeen() + " distinct ids received for " + workload.distinct() + " published");
    }
    if (seen.dedupRows() >= 0 && seen.dedupRows() != workload.distinct()) {
      failures.add(seen.dedupRows() + " dedup rows for " + workload.distinct() + " distinct ids");
    }
    if (seen.balances() != null) {
      int wrong = 0;
      String example = null;
      for (int account = 1; account <= workload.accounts(); account++) {
        Long balance = seen.balances().get(account);
        if (balance == null || balance != workload.expectedBalance(account)) {
          wrong++;
          if (example == null) {
            example = "account " + account + " has " + balance + ", expected " + workload.expectedBalance(account);
          }
        }
      }
      if (seen.balances().size() != workload.accounts()) {
        failures.add(seen.balances().size() + " accounts for " + workload.accounts());
      }
      if (wrong > 0) {
        failures.add(wrong + " balances differ from the sum of their distinct events (" + example + ")");
      }
    }
    if (!seen.brokerDrained()) {
      failures.add("broker not drained: " + seen.brokerDetail());
    }
    return failures;
  }
}
