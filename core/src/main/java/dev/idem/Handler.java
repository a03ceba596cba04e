package dev.idem;

import org.reactivestreams.Publisher;

/**
 * The user's business effect for one message.
 *
 * <p>It runs inside the message's database transaction, after the dedup row was inserted, and
 * only for the first delivery of an id. Everything it writes through {@link Tx} commits or rolls
 * back together with the dedup row. It must not acknowledge anything itself and should not call
 * non-transactional systems (e-mail, HTTP); write an outbox row instead.
 *
 * <p>To fail the message, emit an error: a {@link NonRetryableException} (or any error the
 * configured {@link ErrorClassifier} calls {@link ErrorKind#NON_RETRYABLE}) dead-letters it at
 * once; other errors are retried according to the {@link RetryPolicy}.
 *
 * <p><b>Never swallow an SQL error</b> ({@code execute().onErrorResume(e -> Mono.empty())}, a JDBC
 * habit): PostgreSQL has already aborted the transaction, so COMMIT answers ROLLBACK and nothing
 * is written. The pipeline treats that as the message's failure (retried per the policy, then
 * dead-lettered), never as success. To tolerate an expected conflict, let SQL do it
 * ({@code INSERT ... ON CONFLICT DO NOTHING}).
 *
 * <p>Deadlocks, serialization failures and lock timeouts are retried without spending attempts
 * ({@link ErrorKind#CONTENTION}). A {@link VirtualMachineError} or {@link LinkageError} stops
 * the stream (see {@link IdempotentConsumer}); other {@link Error}s are ordinary failures.
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface Handler<T> {

  /**
   * Applies the effect of one message.
   *
   * @param payload the decoded payload, never {@code null}
   * @param tx the transaction handle; valid only until the returned publisher terminates
   * @return a publisher that completes when the effect is written; its values are ignored
   */
  Publisher<?> handle(T payload, Tx tx);
}
