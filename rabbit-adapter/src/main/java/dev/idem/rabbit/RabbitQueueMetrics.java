package dev.idem.rabbit;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

/**
 * Micrometer gauges for a {@link RabbitSource}: the ready messages of its queue and dead-letter
 * queue, and the deliveries not yet settled. Requires {@code micrometer-core} on the classpath
 * (an optional dependency of this module).
 *
 * <p>Cheap by construction: queue depths are read with one passive declare per queue every
 * {@code refresh} interval (default {@link #DEFAULT_REFRESH}) on a background thread, whatever
 * the scrape rate; a scrape only reads the last value. A depth that could not be read (queue
 * missing, broker unreachable) is reported as {@code NaN}. The unsettled gauge reads an in-memory
 * counter.
 *
 * <pre>{@code
 * RabbitQueueMetrics metrics = RabbitQueueMetrics.of(source);
 * metrics.bindTo(registry);   // idem.rabbit.queue.ready{queue=...}, idem.rabbit.unsettled{queue=...}
 * // on shutdown: metrics.close();
 * }</pre>
 */
public final class RabbitQueueMetrics implements MeterBinder, AutoCloseable {

  /** Default interval between depth reads: 10 s. */
  public static final Duration DEFAULT_REFRESH = Duration.ofSeconds(10);
  /** Gauge of ready messages, tagged {@code queue}. */
  public static final String QUEUE_READY = "idem.rabbit.queue.ready";
  /** Gauge of deliveries received and not yet settled, tagged {@code queue}. */
  public static final String UNSETTLED = "idem.rabbit.unsettled";

  private final RabbitSource<?> source;
  private final Duration refresh;
  private final Map<String, AtomicLong> depths = new LinkedHashMap<>();
  private volatile @Nullable Disposable refresher;

  private RabbitQueueMetrics(RabbitSource<?> source, Duration refresh, List<String> queues) {
    this.source = source;
    this.refresh = refresh;
    for (String queue : queues) {
      depths.put(queue, new AtomicLong(Double.doubleToLongBits(Double.NaN)));
    }
  }

  /**
   * Gauges for the source's queue and its default dead-letter queue
   * ({@link RabbitTopology#deadLetterQueue}), refreshed every {@link #DEFAULT_REFRESH}.
   *
   * @param source the source
   * @return the binder
   */
  public static RabbitQueueMetrics of(RabbitSource<?> source) {
    String queue = source.options().queue();
    return of(source, DEFAULT_REFRESH, List.of(queue, RabbitTopology.deadLetterQueue(queue)));
  }

  /**
   * Gauges for chosen queues.
   *
   * @param source the source whose connection reads the depths
   * @param refresh the interval between reads, positive
   * @param queues the queues to watch
   * @return the binder
   */
  public static RabbitQueueMetrics of(RabbitSource<?> source, Duration refresh, List<String> queues) {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(refresh, "refresh");
    Objects.requireNonNull(queues, "queues");
    if (refresh.isNegative() || refresh.isZero()) {
      throw new IllegalArgumentException("refresh must be positive, was " + refresh);
    }
    return new RabbitQueueMetrics(source, refresh, queues);
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    depths.forEach((queue, value) -> Gauge.builder(QUEUE_READY, value, v -> Double.longBitsToDouble(v.get()))
        .tag("queue", queue)
        .description("Ready messages in the queue, read every " + refresh)
        .register(registry));
    Gauge.builder(UNSETTLED, source, RabbitSource::unsettled)
        .tag("queue", source.options().queue())
        .description("Deliveries received and not yet settled (at most the prefetch)")
        .register(registry);
    start();
  }

  private synchronized void start() {
    if (refresher != null) {
      return;
    }
    refresher = Flux.interval(Duration.ZERO, refresh, Schedulers.boundedElastic())
        .onBackpressureDrop()
        .concatMap(tick -> Flux.fromIterable(depths.entrySet())
            .concatMap(entry -> source.readyCount(entry.getKey())
                .map(count -> (double) count)
                .onErrorReturn(Double.NaN)
                .doOnNext(depth -> entry.getValue().set(Double.doubleToLongBits(depth)))),
            1)
        .subscribe();
  }

  /** Stops reading queue depths. */
  @Override
  public synchronized void close() {
    if (refresher != null) {
      refresher.dispose();
      refresher = null;
    }
  }
}
