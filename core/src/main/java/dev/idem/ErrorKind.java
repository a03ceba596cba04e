package dev.idem;

/** How the pipeline reacts to an error while processing a message. */
public enum ErrorKind {
  /**
   * The message may succeed on another attempt (a deadlock, a serialization failure, a bug
   * that a redeploy fixes). Retried with backoff up to the {@link RetryPolicy}'s attempt limit,
   * then dead-lettered.
   */
  RETRYABLE,
  /** The message can never succeed (invalid content, a rejected business rule): dead-lettered at once. */
  NON_RETRYABLE,
  /**
   * A dependency is broken (database unreachable, connection closed, timeout). Not the
   * message's fault: retried with backoff without limit, never dead-lettered and never
   * acknowledged, until the dependency is back or the pipeline is cancelled.
   */
  INFRASTRUCTURE
}
