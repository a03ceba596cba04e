package dev.idem.kafka.internal;

import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscription;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxOperator;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.kafka.receiver.ReceiverOffset;
import reactor.util.context.Context;

/**
 * Commits the acknowledged offsets of one consumer before its receive stream is cancelled.
 *
 * <p>Reactor Kafka commits acknowledged offsets when the stream is cancelled too (its close
 * event forces a commit before {@code consumer.close}), but asynchronously, after the cancel
 * returned: nobody can wait for it, and a process that exits right after a graceful stop could
 * lose the commits of the messages acknowledged during the grace period (they would be
 * redelivered and found duplicates: safe, but not graceful). Here the cancel first asks Reactor
 * Kafka to commit what is acknowledged ({@link ReceiverOffset#commit()} of the latest
 * acknowledged offset: it commits the consumer's whole acknowledged batch, over all partitions,
 * and completes when the broker answered), then cancels. {@link #awaitCommits(Duration)} waits
 * for those commits, so that {@code KafkaSource.close()} returns only after them.
 */
final class CommitOnCancel {

  private static final Logger log = LoggerFactory.getLogger(CommitOnCancel.class);

  private final String group;
  private final Duration timeout;
  private final Set<Mono<Void>> pending = ConcurrentHashMap.newKeySet();

  CommitOnCancel(String group, Duration timeout) {
    this.group = group;
    this.timeout = timeout;
  }

  /** The latest acknowledged offset of one consumer. */
  static final class Acked {
    private volatile @Nullable ReceiverOffset latest;

    void acknowledged(ReceiverOffset offset) {
      latest = offset;
    }

    Mono<Void> commit() {
      ReceiverOffset offset = latest;
      // Already acknowledged: commit() only schedules a commit of the acknowledged batch.
      return offset == null ? Mono.empty() : offset.commit();
    }
  }

  /**
   * The records, whose cancellation first commits what {@code acked} acknowledged.
   *
   * @param records one consumer's records
   * @param acked its acknowledged offsets
   * @param <R> the record type
   * @return the records
   */
  <R> Flux<R> apply(Flux<R> records, Acked acked) {
    return new FluxOperator<R, R>(records) {
      @Override
      public void subscribe(CoreSubscriber<? super R> actual) {
        source.subscribe(new Relay<>(actual, acked));
      }
    };
  }

  /**
   * Waits for the commits started by cancellations, each for at most the close timeout.
   *
   * @param max how long to wait in all
   */
  void awaitCommits(Duration max) {
    if (pending.isEmpty()) {
      return;
    }
    if (reactor.core.scheduler.Schedulers.isInNonBlockingThread()) {
      log.warn("Kafka source '{}' closed on a non-blocking thread; not waiting for the commits of its cancelled consumers",
          group);
      return;
    }
    Mono.when(pending).timeout(max, Mono.empty()).onErrorResume(error -> Mono.empty()).block();
  }

  private final class Relay<R> implements CoreSubscriber<R>, Subscription {
    private final CoreSubscriber<? super R> actual;
    private final Acked acked;
    private final AtomicBoolean cancelled = new AtomicBoolean();
    private @Nullable Subscription upstream;

    Relay(CoreSubscriber<? super R> actual, Acked acked) {
      this.actual = actual;
      this.acked = acked;
    }

    @Override
    public Context currentContext() {
      return actual.currentContext();
    }

    @Override
    public void onSubscribe(Subscription s) {
      upstream = s;
      actual.onSubscribe(this);
    }

    @Override
    public void onNext(R record) {
      if (!cancelled.get()) {
        actual.onNext(record);
      }
    }

    @Override
    public void onError(Throwable error) {
      if (!cancelled.get()) {
        actual.onError(error);
      }
    }

    @Override
    public void onComplete() {
      if (!cancelled.get()) {
        actual.onComplete();
      }
    }

    @Override
    public void request(long n) {
      Objects.requireNonNull(upstream, "onSubscribe comes first").request(n);
    }

    @Override
    public void cancel() {
      if (!cancelled.compareAndSet(false, true)) {
        return;
      }
      Sinks.Empty<Void> done = Sinks.empty();
      Mono<Void> finished = done.asMono();
      pending.add(finished);
      acked.commit()
          .timeout(timeout)
          .doOnSuccess(ignored -> log.debug("Kafka source '{}' committed its acknowledged offsets before closing", group))
          .onErrorResume(error -> {
            log.warn("Kafka source '{}' could not commit its acknowledged offsets before closing ({}); the consumer's "
                + "close commits them again, and records redelivered meanwhile are found duplicates", group,
                LogText.error(error));
            return Mono.empty();
          })
          .doFinally(signal -> {
            Objects.requireNonNull(upstream, "onSubscribe comes first").cancel();
            pending.remove(finished);
            done.tryEmitEmpty();
          })
          .subscribe();
    }
  }
}
