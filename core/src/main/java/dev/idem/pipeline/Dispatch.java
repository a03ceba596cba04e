package dev.idem.pipeline;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.internal.BatchLanes;
import dev.idem.internal.BoundedMerge;
import dev.idem.internal.GroupCommit;
import dev.idem.internal.LaneControl;
import java.time.Duration;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The first stage, the same in both modes: takes the received deliveries, at most
 * {@code prefetch} taken and not yet settled, to {@code concurrency} {@link BatchLanes}, which
 * keep the order the {@link Ordering} mode asks for. With batching each lane's micro-batches go
 * to the {@link BatchPath}; with {@code maxBatchSize(1)} each lane's "batch" is one message, which
 * goes to the {@link MessagePath} (the path a batch hands a failing message to).
 *
 * @param <T> the payload type
 */
final class Dispatch<T> {

  /** System property that turns group commit off when {@code false}. */
  static final String GROUP_COMMIT_PROPERTY = "idem.groupCommit";

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
      BiFunction<List<Delivery<T>>, LaneControl<Delivery<T>, Outcome<T>>, Flux<Outcome<T>>> batch) {
    boolean batching = maxBatchSize > 1;
    BiFunction<List<Delivery<T>>, LaneControl<Delivery<T>, Outcome<T>>, Flux<Outcome<T>>> path = batching
        ? batch
        : (one, lane) -> message.apply(one.get(0)).flux();
    BiFunction<List<Delivery<T>>, LaneControl<Delivery<T>, Outcome<T>>, Flux<Outcome<T>>> run = (formed, lane) -> {
      metrics.batch(formed.size());
      return path.apply(formed, lane);
    };
    Flux<Delivery<T>> checked = ordering == Ordering.UNORDERED ? received : received.doOnNext(this::requireSourceOrder);
    // The merge's demand alone bounds the messages buffered and in flight to the prefetch.
    return Flux.using(
        () -> new BatchLanes<Delivery<T>, Outcome<T>>(concurrency, maxBatchSize, batching ? batchMaxWait : Duration.ZERO,
            d -> ordering == Ordering.UNORDERED ? null : laneKey(d), run, Outcome::delivery, metrics::abandoned, groupCommit()),
        lanes -> BoundedMerge.merge(checked, lanes::submit, prefetch),
        BatchLanes::dispose);
  }

  /**
   * Group commit with batching: a batch of a lane's share of the prefetch (up to the maximum size)
   * starts at once; smaller ones wait, for a bounded time, for a batch in flight to commit.
   * {@code -Didem.groupCommit=false} turns it off (for comparisons).
   */
  private GroupCommit groupCommit() {
    int fill = Math.min(maxBatchSize, Math.max(2, prefetch / concurrency));
    return maxBatchSize > 1 && !"false".equals(System.getProperty(GROUP_COMMIT_PROPERTY))
        ? GroupCommit.startingAt(fill)
        : GroupCommit.OFF;
  }

  /** Refuses an order the source cannot keep (see {@link Delivery#sourceOrdering()}); the stream fails, nothing is settled. */
  private void requireSourceOrder(Delivery<T> delivery) {
    if (delivery.sourceOrdering() == Ordering.UNORDERED) {
      throw new IllegalArgumentException("this consumer keeps messages in " + ordering + " order, but its source keeps no order"
          + " (" + delivery.partition() + " hands its messages to several consumers at once, as a Kafka share group does):"
          + " build the consumer with ordering(Ordering.UNORDERED)");
    }
  }

  private @Nullable String laneKey(Delivery<T> delivery) {
    try {
      return ordering == Ordering.BY_KEY ? delivery.orderingKey() : delivery.partition();
    } catch (RuntimeException e) {
      // A delivery that cannot say its key is not ordered; validation decides whether it is processable.
      return null;
    }
  }
}
