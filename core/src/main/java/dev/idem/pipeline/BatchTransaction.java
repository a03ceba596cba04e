package dev.idem.pipeline;

import dev.idem.BatchHandler;
import dev.idem.BatchItem;
import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.Handler;
import dev.idem.MessageMetadata;
import dev.idem.TransactionRunner;
import dev.idem.Tx;
import dev.idem.internal.BatchTxHandle;
import dev.idem.internal.MessageObservations;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.internal.TxHandle;
import dev.idem.pipeline.PipelineFailures.CommitRejected;
import dev.idem.pipeline.PipelineFailures.EffectTimeout;
import dev.idem.pipeline.PipelineFailures.HandlerFailure;
import dev.idem.pipeline.PipelineFailures.SlowEffect;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * One transaction attempt for a run of one or more messages, the only one the pipeline has:
 * BEGIN, one multi-row dedup insert that returns the new ids, the effects of the new messages in
 * delivery order, COMMIT, all within the {@code transactionTimeout}. A lane's batch runs it with
 * {@link #attemptBatch}; a message that runs alone, off its lane (the {@link MessagePath}), with
 * {@link #attemptAlone}.
 *
 * @param <T> the payload type
 */
final class BatchTransaction<T> {

  private final String name;
  private final PostgresInbox inbox;
  private final @Nullable BatchHandler<T> batchHandler;
  private final TransactionRunner transactions;
  private final ConsumerMetrics metrics;
  private final Duration transactionTimeout;
  private final MessageObservations observations;
  private final EffectRunner<T> effects;
  private final Duration slowMessageThreshold;

  BatchTransaction(ConsumerSettings<T> settings, EffectRunner<T> effects) {
    this.name = settings.name();
    this.inbox = settings.inbox();
    this.batchHandler = settings.batchHandler();
    this.transactions = settings.transactions();
    this.metrics = settings.metrics();
    this.transactionTimeout = settings.transactionTimeout();
    this.observations = settings.observations();
    this.effects = effects;
    this.slowMessageThreshold = settings.slowMessageThreshold();
  }

  /**
   * One transaction of a batch. A {@code transactionTimeout} that strikes while the handlers run
   * is the running message's (or, for a {@link BatchHandler} of several messages, one of them):
   * it ends as an {@link EffectTimeout}, so that the batch splits instead of retrying as a unit.
   * A per-message {@link Handler} that runs for the {@code slowMessageThreshold} (when it is
   * shorter than the {@code transactionTimeout}) cancels the attempt, which ends as a
   * {@link SlowEffect} naming that message, so that the batch commits without it.
   */
  Mono<Set<Delivery<T>>> attemptBatch(List<Delivery<T>> run, int attempt) {
    return attempt(run, true);
  }

  /**
   * One transaction for one message on its own, off its lane: no {@code slowMessageThreshold}
   * (nothing waits behind it), and a {@code transactionTimeout} stays a timeout, which the
   * message's retry decision treats as the database's, as for any message alone. Errors arrive
   * marked as for {@link #attemptBatch}.
   *
   * @return whether the message was new (its effect applied), {@code false} for a duplicate
   */
  Mono<Boolean> attemptAlone(Delivery<T> delivery, int attempt) {
    return attempt(List.of(delivery), false).map(fresh -> !fresh.isEmpty());
  }

  /** {@code onLane}: a lane's batch, whose slow or hanging message is split off. */
  private Mono<Set<Delivery<T>>> attempt(List<Delivery<T>> run, boolean onLane) {
    long start = System.nanoTime();
    AtomicBoolean effectsDone = new AtomicBoolean();
    AtomicInteger effectAt = new AtomicInteger(EffectTimeout.NOT_IN_EFFECTS);
    SlowEffectWatch watch = onLane && batchHandler == null && slowMessageThreshold.compareTo(transactionTimeout) < 0
        ? new SlowEffectWatch(slowMessageThreshold)
        : null;
    List<String> ids = new ArrayList<>(run.size());
    run.forEach(d -> ids.add(d.id()));
    BiFunction<Connection, Set<String>, Mono<Set<Delivery<T>>>> afterRecord = (connection, newIds) -> {
      Set<Delivery<T>> fresh = firstOccurrences(run, newIds);
      return applyEffects(run, fresh, connection, effectAt, watch)
          .doOnSuccess(ok -> {
            if (watch != null) {
              watch.finished();
            }
            effectAt.set(EffectTimeout.NOT_IN_EFFECTS);
            effectsDone.set(true);
          })
          .thenReturn(fresh);
    };
    Mono<Set<Delivery<T>>> transaction = transactions instanceof R2dbcTransactionRunner r2dbc
        // The default runner sends the dedup insert with BEGIN: one round trip less.
        ? r2dbc.inTransaction(connection -> inbox.recordAllPipelined(connection, name, ids), afterRecord)
        : transactions.inTransaction(connection -> inbox.recordAll(connection, name, ids)
            .flatMap(newIds -> afterRecord.apply(connection, newIds)));
    if (watch != null) {
      // Cancelling the attempt rolls it back (a running statement gets a cancel request first).
      transaction = transaction.takeUntilOther(watch.slow())
          .switchIfEmpty(Mono.error(watch::failure))
          .doFinally(signal -> watch.finished());
    }
    return transaction
        .timeout(transactionTimeout)
        .onErrorMap(error -> onLane && error instanceof TimeoutException && effectAt.get() != EffectTimeout.NOT_IN_EFFECTS,
            error -> new EffectTimeout(error, effectAt.get()))
        .onErrorMap(error -> effectsDone.get() && !(error instanceof HandlerFailure) && CommitRejected.matches(error),
            CommitRejected::new)
        .doOnSuccess(fresh -> reportTransaction(run, start, true))
        .doOnError(error -> reportTransaction(run, start, false));
  }

  /** One transaction's duration, reported for each of its messages (one clock read and one {@code Duration} per transaction). */
  private void reportTransaction(List<Delivery<T>> run, long startNanos, boolean committed) {
    Duration took = Duration.ofNanos(System.nanoTime() - startNanos);
    run.forEach(d -> metrics.transaction(d, took, committed));
  }

  /** The deliveries whose id was newly recorded; of repeats inside the batch, the first. */
  private static <T> Set<Delivery<T>> firstOccurrences(List<Delivery<T>> run, Set<String> newIds) {
    Set<Delivery<T>> fresh = Collections.newSetFromMap(new IdentityHashMap<>(run.size()));
    if (newIds.size() == run.size()) {
      // As many new ids as deliveries: every delivery's id is new and none repeats (the usual case).
      fresh.addAll(run);
      return fresh;
    }
    Set<String> claimed = new HashSet<>();
    for (Delivery<T> d : run) {
      if (newIds.contains(d.id()) && claimed.add(d.id())) {
        fresh.add(d);
      }
    }
    return fresh;
  }

  /**
   * The effects of a batch's new messages on its connection, in delivery order. {@code effectAt}
   * tells which message's effect runs: its index in {@code run}, or
   * {@link EffectTimeout#UNKNOWN} while a batch handler runs for several.
   */
  private Mono<Void> applyEffects(List<Delivery<T>> run, Set<Delivery<T>> fresh, Connection connection, AtomicInteger effectAt,
      @Nullable SlowEffectWatch watch) {
    if (fresh.isEmpty()) {
      return Mono.empty();
    }
    if (batchHandler != null) {
      List<BatchItem<T>> items = new ArrayList<>(fresh.size());
      int only = EffectTimeout.UNKNOWN;
      for (int i = 0; i < run.size(); i++) {
        Delivery<T> d = run.get(i);
        if (fresh.contains(d)) {
          items.add(new BatchItem<>(Objects.requireNonNull(d.id()), Objects.requireNonNull(d.payload()), d));
          only = i;
        }
      }
      int index = items.size() == 1 ? only : EffectTimeout.UNKNOWN;
      // With one message the Tx names it, as a per-message handler's does.
      Tx tx = items.size() == 1
          ? new TxHandle(connection, items.get(0).messageId(), name, MessageMetadata.of(items.get(0).delivery()))
          : new BatchTxHandle(connection, name);
      long start = System.nanoTime();
      return EffectRunner.guardedEffect(() -> {
        effectAt.set(index);
        return batchHandler.handle(items, tx);
      }, -1)
          .doOnSuccess(ok -> {
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            items.forEach(i -> metrics.handler(i.delivery(), took));
          });
    }
    return Flux.range(0, run.size())
        .filter(i -> fresh.contains(run.get(i)))
        .concatMap(i -> {
          effectAt.set(i);
          if (watch != null) {
            watch.started(i);
          }
          return observations.asCurrent(run.get(i),
              effects.runHandler(run.get(i),
                  new TxHandle(connection, Objects.requireNonNull(run.get(i).id()), name, MessageMetadata.of(run.get(i))), i));
        })
        .then();
  }
}
