package dev.idem;

import dev.idem.internal.StopControl;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Stops the streams of {@link IdempotentConsumer#process(org.reactivestreams.Publisher, GracefulShutdown)}
 * without rolling back work that can still finish.
 *
 * <pre>{@code
 * GracefulShutdown shutdown = GracefulShutdown.create();
 * Disposable running = payments.process(source.receive(), shutdown).subscribe();
 * // on shutdown:
 * ShutdownReport report = shutdown.stop(Duration.ofSeconds(20)).block();
 * source.close();
 * }</pre>
 *
 * <h2>What {@link #stop(Duration)} guarantees</h2>
 * <ol>
 *   <li>At once, no new message starts: the pipeline stops requesting from the source, and
 *       deliveries already received but not started are never started. They stay
 *       unacknowledged, so the broker redelivers them (to this consumer group or queue, after the
 *       source is closed); they are counted in {@link ShutdownReport#notStarted()}.</li>
 *   <li>Messages in flight finish their transaction and settle (acknowledgement, dead letter)
 *       for up to the grace period, while the source stays open so that their acknowledgements
 *       reach the broker. That includes messages that wait in a retry backoff (a failed attempt,
 *       contention, an infrastructure error; in batch mode also a whole batch, or a message
 *       retried off its lane) whose next attempt begins within the grace period: they try again.
 *       A message whose backoff ends only after the grace period is abandoned at once, not
 *       waited for: it has no open transaction and stays unacknowledged.</li>
 *   <li>When the grace period runs out, what is still in flight is cancelled: its transaction
 *       rolls back and its message stays unacknowledged, exactly as when the stream is cancelled.
 *       Nothing is lost either way.</li>
 *   <li>Then, once every outcome has been delivered downstream, the outcome {@code Flux}
 *       completes normally ({@code onComplete}); at the latest when the grace period runs out, even
 *       if the subscriber stopped requesting (the outcomes it never asked for are dropped; their
 *       messages are settled). The source subscription is then cancelled (closing the Kafka consumer or the RabbitMQ channel). Close the
 *       source afterwards: {@code KafkaSource.close()} waits until the offsets acknowledged
 *       during the grace period are committed.</li>
 * </ol>
 *
 * <p>One {@code GracefulShutdown} may govern several streams (several consumers, or several
 * subscriptions); {@code stop} stops them all and sums their reports. A stream subscribed after
 * the stop began completes at once, empty, without subscribing to its source. Thread-safe.
 */
public final class GracefulShutdown {

  private final List<StopControl> running = new ArrayList<>();
  private @Nullable Mono<ShutdownReport> stopped;
  private volatile boolean stopping;

  private GracefulShutdown() {}

  /**
   * Creates a shutdown handle that governs nothing until a stream is subscribed with it.
   *
   * @return a new handle, not stopping
   */
  public static GracefulShutdown create() {
    return new GracefulShutdown();
  }

  /**
   * Tells whether {@link #stop(Duration)} was called.
   *
   * @return {@code true} once stopping began, for ever after
   */
  public boolean isStopping() {
    return stopping;
  }

  /**
   * Begins the stop at once (when called, not when the result is subscribed) and tells when it
   * is over. Calling it again returns the first call's result and ignores the new grace period.
   *
   * @param gracePeriod how long messages in flight may take to finish and settle; zero cancels
   *     them at once
   * @return the report, emitted after every governed stream terminated; at once, with zeros,
   *     when none is running
   */
  public Mono<ShutdownReport> stop(Duration gracePeriod) {
    Objects.requireNonNull(gracePeriod, "gracePeriod");
    if (gracePeriod.isNegative()) {
      throw new IllegalArgumentException("gracePeriod must not be negative, was " + gracePeriod);
    }
    List<StopControl> toStop;
    synchronized (this) {
      if (stopped != null) {
        return stopped;
      }
      stopping = true;
      toStop = List.copyOf(running);
      if (toStop.isEmpty()) {
        stopped = Mono.just(ShutdownReport.NOTHING_RUNNING);
        return stopped;
      }
      stopped = Flux.fromIterable(toStop)
          .flatMap(StopControl::report)
          .reduce(ShutdownReport::plus)
          .cache();
    }
    toStop.forEach(control -> control.stop(gracePeriod));
    return stopped;
  }

  /**
   * Registers a new stream, or tells it to end at once.
   *
   * @param consumer the consumer name, for the log
   * @param notStarted told of each delivery that will not be started
   * @return the stream's control, or {@code null} when stopping already began
   */
  @Nullable
  StopControl attach(String consumer, Consumer<Object> notStarted) {
    synchronized (this) {
      if (stopping) {
        return null;
      }
      StopControl control = new StopControl(consumer, notStarted, this::detach);
      running.add(control);
      return control;
    }
  }

  private synchronized void detach(StopControl control) {
    running.remove(control);
  }

  @Override
  public String toString() {
    return "GracefulShutdown[stopping=" + stopping + "]";
  }
}
