package dev.idem.spring;

import dev.idem.GracefulShutdown;
import dev.idem.IdempotentConsumer;
import dev.idem.ShutdownReport;
import dev.idem.spring.internal.ConsumerTracker;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * One consumer run by the starter: its pipeline, its source's subscription and what the health
 * indicator reads. Obtained from {@link IdemConsumers#consumer(String)}. Thread-safe.
 */
public final class ManagedConsumer {

  /** Where a consumer is in its life. */
  public enum State {
    /** Created, not started yet. */
    NOT_STARTED,
    /** Consuming. */
    RUNNING,
    /** Stopping: no new messages; those in flight get the grace period. */
    STOPPING,
    /** Stopped by the application's shutdown. */
    STOPPED,
    /** The stream ended by itself, with an error or without one; it is not restarted. */
    FAILED
  }

  private static final Logger log = LoggerFactory.getLogger(ManagedConsumer.class);

  private final IdemConsumerDefinition<?> definition;
  private final IdempotentConsumer<?> consumer;
  private final ConsumerTracker tracker;
  private volatile State state = State.NOT_STARTED;
  private volatile @Nullable Throwable failure;
  private volatile @Nullable ShutdownReport lastShutdown;
  private @Nullable Running<?> running;

  <T> ManagedConsumer(IdemConsumerDefinition<T> definition, IdempotentConsumer<T> consumer, ConsumerTracker tracker) {
    this.definition = Objects.requireNonNull(definition, "definition");
    this.consumer = Objects.requireNonNull(consumer, "consumer");
    this.tracker = Objects.requireNonNull(tracker, "tracker");
  }

  /**
   * The consumer's name.
   *
   * @return the name
   */
  public String name() {
    return definition.name();
  }

  /**
   * Where the consumer is in its life.
   *
   * @return the state
   */
  public State state() {
    return state;
  }

  /**
   * Why the stream ended by itself, when it did.
   *
   * @return the error, or {@code null}
   */
  public @Nullable Throwable failure() {
    return failure;
  }

  /**
   * The age of the oldest message received and not settled.
   *
   * @return the age, zero when nothing waits
   */
  public Duration oldestUnsettledAge() {
    return tracker.oldestUnsettledAge();
  }

  /**
   * Messages received and not settled (buffered or in flight).
   *
   * @return the count
   */
  public int unsettled() {
    return tracker.unsettled();
  }

  /**
   * Failures since the last settled message: attempts that failed on infrastructure, and
   * settlements the broker adapter could not complete.
   *
   * @return the count
   */
  public int failuresInARow() {
    return tracker.failuresInARow();
  }

  /**
   * The last failure counted by {@link #failuresInARow()}.
   *
   * @return the failure, or {@code null}
   */
  public @Nullable Throwable lastFailure() {
    return tracker.lastFailure();
  }

  /**
   * What the last graceful stop did: messages in flight that completed within the grace period,
   * those abandoned (rolled back, redelivered later), those received and never started.
   *
   * @return the report, empty before the first stop
   */
  public Optional<ShutdownReport> lastShutdownReport() {
    return Optional.ofNullable(lastShutdown);
  }

  /**
   * The definition the consumer was built from.
   *
   * @return the definition
   */
  public IdemConsumerDefinition<?> definition() {
    return definition;
  }

  synchronized void start() {
    if (state == State.RUNNING || state == State.STOPPING) {
      return;
    }
    running = startTyped(definition, consumer);
    log.info("Idem consumer '{}' started on {}", name(), running.source);
  }

  @SuppressWarnings("unchecked")
  private <T> Running<T> startTyped(IdemConsumerDefinition<T> def, IdempotentConsumer<?> pipeline) {
    ConsumerSource<T> source = def.createSource();
    Running<T> r = new Running<>(source);
    failure = null;
    // Before subscribing: a source that fails at once ends the stream inside subscribe().
    state = State.RUNNING;
    r.subscription = ((IdempotentConsumer<T>) pipeline).process(source.receive(), r.shutdown)
        .subscribe(outcome -> {}, this::ended, () -> ended(null));
    return r;
  }

  private void ended(@Nullable Throwable error) {
    if (state == State.STOPPING || state == State.STOPPED) {
      return;
    }
    failure = error != null ? error : new IllegalStateException("the source completed; a broker source should never complete");
    state = State.FAILED;
    log.error("Idem consumer '{}' stopped consuming: {}. Its health is DOWN; restart the application to resume.",
        name(), failure.toString(), failure);
  }

  /**
   * Stops taking messages, gives those in flight the definition's grace period to commit and
   * settle ({@link GracefulShutdown}), cancels the rest (rolled back, redelivered later), then
   * closes the source.
   */
  Mono<Void> stop() {
    Running<?> r;
    synchronized (this) {
      r = running;
      running = null;
      if (r == null) {
        return Mono.empty();
      }
      if (state == State.RUNNING) {
        state = State.STOPPING;
      }
    }
    return r.shutdown.stop(definition.shutdownGracePeriod())
        .doOnNext(report -> {
          lastShutdown = report;
          log.info("Idem consumer '{}' stopped: {} in flight completed, {} abandoned (rolled back, redelivered later), "
              + "{} received and not started, within the grace period: {}", name(), report.completedInFlight(),
              report.abandonedInFlight(), report.notStarted(), report.withinGracePeriod());
        })
        .onErrorResume(error -> {
          log.warn("Idem consumer '{}': the graceful stop failed ({}); cancelling", name(), error.toString());
          return Mono.empty();
        })
        // KafkaSource.close() waits for its last commit: not on the event-loop thread that ended the stream.
        .then(Mono.fromRunnable(() -> {
          Objects.requireNonNull(r.subscription, "set when it started").dispose();
          close(r);
        }).subscribeOn(Schedulers.boundedElastic()))
        .doFinally(signal -> {
          if (state == State.STOPPING) {
            state = State.STOPPED;
          }
        })
        .then();
  }

  private void close(Running<?> r) {
    try {
      r.source.close();
    } catch (RuntimeException e) {
      log.warn("Idem consumer '{}': closing its source failed: {}", name(), e.toString());
    }
  }

  @Override
  public String toString() {
    return "ManagedConsumer[" + name() + ", " + state + "]";
  }

  private static final class Running<T> {
    final ConsumerSource<T> source;
    final GracefulShutdown shutdown = GracefulShutdown.create();
    @Nullable Disposable subscription;

    Running(ConsumerSource<T> source) {
      this.source = source;
    }
  }
}
