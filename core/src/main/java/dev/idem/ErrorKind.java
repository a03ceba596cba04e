package dev.idem;

/** How the pipeline reacts to an error while processing a message. */
public enum ErrorKind {
  /**
   * The message may succeed on another attempt (a bug that a redeploy fixes, a constraint
   * that another message will satisfy). Retried with backoff up to the {@link RetryPolicy}'s attempt limit,
   * then dead-lettered.
   */
  RETRYABLE,
  /**
   * The database refused the transaction because of concurrent work, not because of the message:
   * a deadlock ({@code 40P01}), a serialization failure ({@code 40001}) or a lock wait past
   * {@code lock_timeout} ({@code 55P03}). Retried with the {@link RetryPolicy}'s backoff without
   * spending the message's attempts, up to {@link RetryPolicy#maxContentionRetries()} times in
   * a row; after that each further failure counts as {@link #RETRYABLE}.
   */
  CONTENTION,
  /** The message can never succeed (invalid content, a rejected business rule): dead-lettered at once. */
  NON_RETRYABLE,
  /**
   * A dependency is broken (database unreachable, connection closed, timeout). Not the
   * message's fault: retried with backoff without limit, never dead-lettered and never
   * acknowledged, until the dependency is back or the pipeline is cancelled.
   */
  INFRASTRUCTURE
}
