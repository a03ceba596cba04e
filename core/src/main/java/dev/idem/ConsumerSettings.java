package dev.idem;

import dev.idem.internal.MessageObservations;
import dev.idem.postgres.PostgresInbox;
import java.time.Duration;

/**
 * What the stages of one consumer's pipeline read: the settings its {@link IdempotentConsumer.Builder}
 * checked, fixed at build time. Immutable, shared by all the stages of one consumer.
 *
 * @param name the consumer name: part of the dedup key and of every log line
 * @param inbox the inbox table that records processed ids
 * @param handler the per-message effect, or {@code null} when {@code batchHandler} is set
 * @param batchHandler the set-based effect, or {@code null} when {@code handler} is set
 * @param transactions the transaction runner (the default R2DBC one or the application's)
 * @param retryPolicy attempts and backoff
 * @param classifier the error classifier, falling back to the defaults
 * @param maxIdLength the longest accepted message id
 * @param metrics where the pipeline reports its work
 * @param transactionTimeout the longest time one transaction attempt may take
 * @param stuckWarningInterval how often a message waiting for infrastructure is logged again at WARN
 * @param slowMessageThreshold how long a per-message handler may run inside a micro-batch before
 *     its message is detached from the batch and continues on its own
 * @param observations the Micrometer observations of each message
 * @param <T> the payload type
 */
record ConsumerSettings<T>(
    String name,
    PostgresInbox inbox,
    Handler<T> handler,
    BatchHandler<T> batchHandler,
    TransactionRunner transactions,
    RetryPolicy retryPolicy,
    ErrorClassifier classifier,
    int maxIdLength,
    ConsumerMetrics metrics,
    Duration transactionTimeout,
    Duration stuckWarningInterval,
    Duration slowMessageThreshold,
    MessageObservations observations) {}
