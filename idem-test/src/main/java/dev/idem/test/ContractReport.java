package dev.idem.test;

import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * What a {@link HandlerContract} run did and found.
 *
 * @param handlerName the name the contract was given
 * @param messages how many messages the user gave
 * @param schedulesRun the schedules that ran, in order, with their durations
 * @param findings what was found wrong; empty when the handler kept the contract
 * @param elapsed the whole run's wall time
 */
public record ContractReport(String handlerName, int messages, List<ScheduleRun> schedulesRun,
    List<Finding> findings, Duration elapsed) {

  /**
   * Copies the lists.
   *
   * @param handlerName the name the contract was given
   * @param messages how many messages the user gave
   * @param schedulesRun the schedules that ran, in order, with their durations
   * @param findings what was found wrong; empty when the handler kept the contract
   * @param elapsed the whole run's wall time
   */
  public ContractReport {
    schedulesRun = List.copyOf(schedulesRun);
    findings = List.copyOf(findings);
  }

  /**
   * One schedule's run.
   *
   * @param schedule the schedule
   * @param deliveries how many deliveries it handed the pipeline
   * @param elapsed its wall time
   */
  public record ScheduleRun(Schedule schedule, int deliveries, Duration elapsed) {}

  /**
   * Tells whether the handler kept the contract under every schedule.
   *
   * @return {@code true} when there are no findings
   */
  public boolean passed() {
    return findings.isEmpty();
  }

  /**
   * The mistakes found, without repetitions.
   *
   * @return the set, empty when passed
   */
  public Set<Mistake> mistakes() {
    return findings.stream().map(Finding::mistake)
        .collect(Collectors.toCollection(() -> EnumSet.noneOf(Mistake.class)));
  }

  /**
   * The report as text: a summary line, then each finding.
   *
   * @return the text
   */
  public String describe() {
    StringBuilder text = new StringBuilder();
    text.append("Handler '").append(handlerName).append("': ").append(messages).append(" messages, ")
        .append(schedulesRun.size()).append(" schedules, ")
        .append(schedulesRun.stream().mapToInt(ScheduleRun::deliveries).sum()).append(" deliveries in ")
        .append(elapsed.toMillis()).append(" ms: ");
    if (passed()) {
      return text.append("effects exactly once under every schedule").toString();
    }
    text.append(findings.size()).append(findings.size() == 1 ? " finding" : " findings").append(' ')
        .append(mistakes());
    for (Finding finding : findings) {
      text.append("\n\n  ").append(finding.describe());
    }
    return text.toString();
  }

  @Override
  public String toString() {
    return describe();
  }
}
