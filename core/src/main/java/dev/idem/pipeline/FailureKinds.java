package dev.idem.pipeline;

import dev.idem.DeadLetter;
import dev.idem.DeadLetterReason;
import dev.idem.ErrorClassifier;
import dev.idem.ErrorKind;
import dev.idem.internal.JvmErrors;
import dev.idem.pipeline.PipelineFailures.CommitRejected;
import dev.idem.pipeline.PipelineFailures.HandlerFailure;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Classifies the failure that ended an attempt by its origin, and says what a failure means for
 * the stream (fatal, or surfaced without Idem's markers) and for a dead letter.
 */
final class FailureKinds {

  private final String name;
  private final ErrorClassifier classifier;
  private final long warningIntervalNanos;
  /** When one of the consumer's messages last logged broken infrastructure at WARN (System.nanoTime()); 0 before. */
  private final AtomicLong lastInfrastructureWarning = new AtomicLong();

  FailureKinds(ConsumerSettings<?> settings) {
    this.name = settings.name();
    this.classifier = settings.classifier();
    this.warningIntervalNanos = settings.stuckWarningInterval().toNanos();
  }

  /**
   * Whether a message's wait for broken infrastructure may be logged at WARN: one message per
   * consumer per {@code stuckWarningInterval}, so that an outage (a primary switch fails every
   * message in flight at once) is logged once, not once per message; the others log at DEBUG.
   */
  boolean claimInfrastructureWarning() {
    long now = System.nanoTime();
    long last = lastInfrastructureWarning.get();
    return (last == 0 || now - last >= warningIntervalNanos) && lastInfrastructureWarning.compareAndSet(last, now);
  }

  /**
   * What kind of failure ended an attempt. The three origins are classified apart:
   * <ul>
   *   <li>the handler's own errors as the classifier says (they are the message's, unless they
   *       are I/O or contention);</li>
   *   <li>a COMMIT the database refused after the handler ran (it swallowed an SQL error, a
   *       deferred constraint, a serialization failure) as the classifier says of the cause:
   *       the message's fault, or contention;</li>
   *   <li>errors of the transaction itself (a refused connection, a closed pool, a missing
   *       inbox table, a read-only server, a timeout) as infrastructure, unless the classifier
   *       calls them non-retryable: they are never the message's fault.</li>
   * </ul>
   * JVM errors ({@link VirtualMachineError}, {@link LinkageError}) are fatal wherever they come from.
   */
  ErrorKind kindOf(Throwable error) {
    if (error instanceof HandlerFailure || error instanceof CommitRejected) {
      return classify(Objects.requireNonNull(error.getCause()));
    }
    ErrorKind kind = classify(error);
    return kind == ErrorKind.RETRYABLE || kind == ErrorKind.CONTENTION ? ErrorKind.INFRASTRUCTURE : kind;
  }

  private ErrorKind classify(Throwable error) {
    ErrorKind kind = classifier.classify(error);
    return kind != null ? kind : ErrorKind.RETRYABLE;
  }

  /**
   * The SQLSTATE when the server stopped one of the handler's own statements on a timeout:
   * {@code 57014} (statement cancelled, as {@code statement_timeout} does) or {@code 55P03}
   * ({@code lock_timeout}); {@code null} for anything else. Such a stop is the running
   * message's, like the {@code transactionTimeout} striking while its effect runs: a batch splits
   * around it instead of retrying as a unit. The same codes in BEGIN, the dedup insert or COMMIT
   * are not the handler's and stay the database's.
   */
  static @Nullable String serverTimeoutOfEffect(Throwable error) {
    if (!(error instanceof HandlerFailure)) {
      return null;
    }
    for (Throwable t = error.getCause(); t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof io.r2dbc.spi.R2dbcException r2dbc
          && ("57014".equals(r2dbc.getSqlState()) || "55P03".equals(r2dbc.getSqlState()))) {
        return r2dbc.getSqlState();
      }
    }
    return null;
  }

  static boolean isFatal(Throwable error) {
    return JvmErrors.isFatal(error);
  }

  /** What the stream ends with: the JVM error itself when there is one, else the error without Idem's markers. */
  static Throwable surfaced(Throwable error) {
    Error jvmError = JvmErrors.fatalIn(error);
    return jvmError != null ? jvmError : cause(error);
  }

  static Throwable cause(Throwable error) {
    return error instanceof HandlerFailure || error instanceof CommitRejected ? Objects.requireNonNull(error.getCause()) : error;
  }

  DeadLetter deadLetterFor(Throwable error, int attempts) {
    DeadLetterReason reason = kindOf(error) == ErrorKind.NON_RETRYABLE
        ? DeadLetterReason.NON_RETRYABLE_ERROR
        : DeadLetterReason.RETRIES_EXHAUSTED;
    return DeadLetter.of(reason, cause(error), name, attempts);
  }
}
