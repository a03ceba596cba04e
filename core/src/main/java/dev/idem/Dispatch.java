package dev.idem;

import dev.idem.internal.BatchLanes;
import dev.idem.internal.BoundedMerge;
import dev.idem.internal.KeyedLanes;
import java.time.Duration;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The first stage: takes the received deliveries, at most {@code prefetch} buffered and at most
 * {@code concurrency} in flight, in the order the {@link Ordering} mode asks for, to the
 * {@link MessagePath} one by one or, with batching, to the {@link BatchPath} in micro-batches
 * formed by {@link BatchLanes}.
 *
 * @param <T> the payload type
 */
final class Dispatch<T> {

  private final int maxBatchSize;
  private final Duration batchMaxWait;
  private final int concurrency;
  private final int prefetch;
  private final Ordering ordering;
  private final ConsumerMetrics metrics;

  Dispatch(int maxBatchSize, Duration batchMaxWait, int concurrency, int prefetch, Ordering ordering, ConsumerMetrics metrics) {
    this.maxBatchSize = maxBatchSize;
    this.batchMaxWait = batchMaxWait;
    this.concurrency = concurrency;
    this.prefetch = prefetch;
    this.ordering = ordering;
    this.metrics = metrics;
  }

  /**
   * The outcomes of {@code received}: with batching each batch goes to {@code batch}, else each
   * delivery to {@code message}.
   */
  Flux<Outcome<T>> outcomes(Flux<Delivery<T>> received, Function<Delivery<T>, Mono<Outcome<T>>> message,
      BiFunction<List<Delivery<T>>, BatchLanes.LaneControl<Delivery<T>, Outcome<T>>, Flux<Outcome<T>>> batch) {
    if (maxBatchSize > 1) {
      // The merge's demand alone bounds the messages buffered and in flight to the prefetch.
      return Flux.using(
          () -> new BatchLanes<Delivery<T>, Outcome<T>>(concurrency, maxBatchSize, batchMaxWait,
              d -> ordering == Ordering.UNORDERED ? null : laneKey(d), batch, Outcome::delivery, metrics::abandoned),
          lanes -> BoundedMerge.merge(received, lanes::submit, prefetch),
          BatchLanes::dispose);
    }
    Flux<Delivery<T>> buffered = received.limitRate(prefetch);
    if (ordering == Ordering.UNORDERED) {
      return buffered.flatMap(message, concurrency, 1);
    }
    KeyedLanes lanes = new KeyedLanes();
    return buffered.flatMap(d -> lanes.run(laneKey(d), message.apply(d)), concurrency, 1);
  }

  private String laneKey(Delivery<T> delivery) {
    try {
      return ordering == Ordering.BY_KEY ? delivery.orderingKey() : delivery.partition();
    } catch (RuntimeException e) {
      // A delivery that cannot say its key is not ordered; validation decides whether it is processable.
      return null;
    }
  }
}
