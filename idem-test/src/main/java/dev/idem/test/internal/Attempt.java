package dev.idem.test.internal;

import dev.idem.NonRetryableException;
import java.io.Serial;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One run of the handler: counts the statements it executes through its {@code Tx} and, when a
 * failure is planned, fails the attempt once statement {@code failAfter} has completed (the next
 * statement's execution, or the handler's completion, emits {@link InjectedFailure} instead).
 */
final class Attempt {

  /** No failure planned. */
  static final int NO_FAILURE = -1;

  private final AtomicInteger statements = new AtomicInteger();
  private final AtomicLong allStatements;
  private final int failAfter;

  Attempt(AtomicLong allStatements, int failAfter) {
    this.allStatements = allStatements;
    this.failAfter = failAfter;
  }

  /** Called before a statement executes; {@code true} when it must fail instead. */
  boolean beforeStatement() {
    if (failureDue()) {
      return true;
    }
    statements.incrementAndGet();
    allStatements.incrementAndGet();
    return false;
  }

  boolean failureDue() {
    return failAfter != NO_FAILURE && statements.get() >= failAfter;
  }

  InjectedFailure failure() {
    return new InjectedFailure(failAfter);
  }

  /** The error the runner injects; non-retryable, so the attempt is rolled back and dead-lettered at once. */
  static final class InjectedFailure extends NonRetryableException {

    @Serial private static final long serialVersionUID = 1L;

    InjectedFailure(int afterStatement) {
      super("idem-test injected a failure after statement " + afterStatement + " of the handler");
    }
  }
}
