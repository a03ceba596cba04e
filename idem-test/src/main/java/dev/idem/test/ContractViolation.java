package dev.idem.test;

import java.io.Serial;

/**
 * Thrown by {@link HandlerContract#verify()} when the handler did not keep its effects exactly
 * once under every schedule. An {@link AssertionError}, so test frameworks report it as a failed
 * test; its message names each mistake, the schedule, the step and the messages.
 */
public final class ContractViolation extends AssertionError {

  @Serial private static final long serialVersionUID = 1L;

  /** The report, not serialized. */
  private final transient ContractReport report;

  /**
   * Creates the error from a report with findings.
   *
   * @param report the run's report
   */
  public ContractViolation(ContractReport report) {
    super(report.describe());
    this.report = report;
  }

  /**
   * The whole report.
   *
   * @return the report, or {@code null} after deserialization
   */
  public ContractReport report() {
    return report;
  }
}
