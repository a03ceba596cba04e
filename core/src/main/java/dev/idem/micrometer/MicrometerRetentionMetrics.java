package dev.idem.micrometer;

import dev.idem.retention.RetentionMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Publishes retention's work to a Micrometer registry. Every meter carries the tag {@code table}
 * (for a rotating inbox, the batch meters carry the slot partition's name).
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>meaning</th></tr>
 *   <tr><td>{@value #REMOVED}</td><td>counter</td><td>rows removed (estimated for truncated slots)</td></tr>
 *   <tr><td>{@value #BATCH}</td><td>timer with p50/p95/p99 and max</td><td>how long each cleanup batch took, lock wait included</td></tr>
 *   <tr><td>{@value #OLDEST_KEPT_AGE}</td><td>gauge, seconds</td><td>age of the oldest row kept after the last run</td></tr>
 * </table>
 *
 * <p>Meters of a table are registered on its first report. Thread-safe.
 */
public final class MicrometerRetentionMetrics implements RetentionMetrics {

  /** Rows removed. */
  public static final String REMOVED = "idem.retention.removed";
  /** Batch duration. */
  public static final String BATCH = "idem.retention.batch";
  /** Age of the oldest row kept, seconds. */
  public static final String OLDEST_KEPT_AGE = "idem.retention.oldest.kept.age";

  private final MeterRegistry registry;
  private final Map<String, AtomicLong> oldestMillis = new ConcurrentHashMap<>();

  /**
   * Creates the metrics.
   *
   * @param registry the registry
   */
  public MicrometerRetentionMetrics(MeterRegistry registry) {
    this.registry = Objects.requireNonNull(registry, "registry");
  }

  @Override
  public void batch(String table, long removed, Duration took) {
    Counter.builder(REMOVED).tag("table", table).description("Rows removed by retention").register(registry).increment(removed);
    Timer.builder(BATCH).tag("table", table).publishPercentiles(0.5, 0.95, 0.99).description("Retention batch duration")
        .register(registry).record(took);
  }

  @Override
  public void oldestKept(String table, Duration age) {
    oldestMillis.computeIfAbsent(table, t -> {
      AtomicLong holder = new AtomicLong();
      Gauge.builder(OLDEST_KEPT_AGE, holder, h -> h.get() / 1000.0).tag("table", t).baseUnit("seconds")
          .description("Age of the oldest row kept").register(registry);
      return holder;
    }).set(age.toMillis());
  }
}
