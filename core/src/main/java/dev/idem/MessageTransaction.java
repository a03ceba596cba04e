package dev.idem;

import dev.idem.PipelineFailures.CommitRejected;
import dev.idem.PipelineFailures.HandlerFailure;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.TxHandle;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiFunction;
import reactor.core.publisher.Mono;

/**
 * One transaction attempt for one message: BEGIN, the dedup row, the handler if the row is new,
 * COMMIT, all within the {@code transactionTimeout}.
 *
 * @param <T> the payload type
 */
final class MessageTransaction<T> {

  private final String name;
  private final PostgresInbox inbox;
  private final TransactionRunner transactions;
  private final ConsumerMetrics metrics;
  private final Duration transactionTimeout;
  private final EffectRunner<T> effects;

  MessageTransaction(ConsumerSettings<T> settings, EffectRunner<T> effects) {
    this.name = settings.name();
    this.inbox = settings.inbox();
    this.transactions = settings.transactions();
    this.metrics = settings.metrics();
    this.transactionTimeout = settings.transactionTimeout();
    this.effects = effects;
  }

  /**
   * One transaction: the dedup row, then the handler if the row is new. Errors of the handler
   * arrive wrapped in {@link HandlerFailure}; an error after the handler succeeded that says the
   * database would not commit its writes (COMMIT answered ROLLBACK, a deferred constraint, a
   * serialization failure) arrives wrapped in {@link CommitRejected}; any other error came from
   * the transaction itself (acquiring a connection, BEGIN, the inbox insert, COMMIT, the timeout).
   */
  Mono<Boolean> attemptOnce(Delivery<T> delivery, int attempt) {
    long start = System.nanoTime();
    AtomicBoolean handlerDone = new AtomicBoolean();
    BiFunction<Connection, Boolean, Mono<Boolean>> afterRecord = (connection, inserted) -> inserted
        ? effects.runHandler(delivery, new TxHandle(connection, delivery.id(), name, MessageMetadata.of(delivery)))
            .doOnSuccess(ok -> handlerDone.set(true))
        : Mono.just(false);
    Mono<Boolean> transaction = transactions instanceof R2dbcTransactionRunner r2dbc
        // The default runner sends the dedup insert with BEGIN: one round trip less.
        ? r2dbc.inTransaction(connection -> inbox.recordPipelined(connection, name, delivery.id()), afterRecord)
        : transactions.inTransaction(connection -> inbox.record(connection, name, delivery.id())
            .flatMap(inserted -> afterRecord.apply(connection, inserted)));
    return transaction
        .timeout(transactionTimeout)
        .onErrorMap(error -> handlerDone.get() && !(error instanceof HandlerFailure) && CommitRejected.matches(error),
            CommitRejected::new)
        .doOnSuccess(inserted -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), true))
        .doOnError(error -> metrics.transaction(delivery, Duration.ofNanos(System.nanoTime() - start), false));
  }
}
