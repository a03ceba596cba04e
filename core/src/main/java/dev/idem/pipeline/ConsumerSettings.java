package dev.idem.pipeline;

import dev.idem.BatchHandler;
import dev.idem.ConsumerMetrics;
import dev.idem.ErrorClassifier;
import dev.idem.Handler;
import dev.idem.Ordering;
import dev.idem.RetryPolicy;
import dev.idem.TransactionRunner;
import dev.idem.internal.MessageObservations;
import dev.idem.postgres.PostgresInbox;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * What the stages of one consumer's pipeline read: the settings its {@code IdempotentConsumer.Builder}
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
 * @param maxBatchSize the most messages one transaction takes; 1 runs each message alone
 * @param batchMaxWait how long a lane waits for a batch to fill
 * @param concurrency how many lanes (transactions at once)
 * @param prefetch the most messages taken from the source and not yet settled
 * @param ordering the order kept among messages
 * @param <T> the payload type
 */
public record ConsumerSettings<T>(
    String name,
    PostgresInbox inbox,
    @Nullable Handler<T> handler,
    @Nullable BatchHandler<T> batchHandler,
    TransactionRunner transactions,
    RetryPolicy retryPolicy,
    ErrorClassifier classifier,
    int maxIdLength,
    ConsumerMetrics metrics,
    Duration transactionTimeout,
    Duration stuckWarningInterval,
    Duration slowMessageThreshold,
    MessageObservations observations,
    int maxBatchSize,
    Duration batchMaxWait,
    int concurrency,
    int prefetch,
    Ordering ordering) {}
