package dev.idem.micrometer;

import dev.idem.outbox.OutboxMessage;
import dev.idem.outbox.OutboxMetrics;
import dev.idem.outbox.OutboxStats;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Objects;

/**
 * Publishes an outbox relay's work to a Micrometer registry. Every meter carries the tag
 * {@code outbox}.
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>meaning</th></tr>
 *   <tr><td>{@value #PUBLISHED}</td><td>counter</td><td>messages confirmed by their destination and marked sent</td></tr>
 *   <tr><td>{@value #FAILED}</td><td>counter</td><td>failed publish attempts (each is retried, or parked at the limit)</td></tr>
 *   <tr><td>{@value #PARKED_TOTAL}</td><td>counter</td><td>rows this relay parked</td></tr>
 *   <tr><td>{@value #DELAY}</td><td>timer with p50/p95/p99</td><td>from the row's creation to its mark as sent</td></tr>
 *   <tr><td>{@value #UNSENT}</td><td>gauge</td><td>pending rows (stats query, every stats interval)</td></tr>
 *   <tr><td>{@value #OLDEST_UNSENT_AGE}</td><td>gauge, seconds</td><td>age of the oldest pending row</td></tr>
 *   <tr><td>{@value #PARKED}</td><td>gauge</td><td>parked rows in the table (all relays')</td></tr>
 * </table>
 *
 * <p>Gauges show the last stats query's figures (every {@code statsInterval} of the relay, 10 s
 * by default) and are 0 before the first. Thread-safe.
 */
public final class MicrometerOutboxMetrics implements OutboxMetrics {

  /** Messages sent. */
  public static final String PUBLISHED = "idem.outbox.published";
  /** Failed attempts. */
  public static final String FAILED = "idem.outbox.failed.attempts";
  /** Rows parked by this relay. */
  public static final String PARKED_TOTAL = "idem.outbox.parked.total";
  /** Creation to sent. */
  public static final String DELAY = "idem.outbox.delay";
  /** Pending rows. */
  public static final String UNSENT = "idem.outbox.unsent";
  /** Age of the oldest pending row in seconds. */
  public static final String OLDEST_UNSENT_AGE = "idem.outbox.oldest.unsent.age";
  /** Parked rows in the table. */
  public static final String PARKED = "idem.outbox.parked";

  private final Counter published;
  private final Counter failed;
  private final Counter parkedTotal;
  private final Timer delay;
  private volatile OutboxStats last = new OutboxStats(0, Duration.ZERO, 0);

  /**
   * Registers the meters of one relay.
   *
   * @param registry the registry
   * @param outbox the {@code outbox} tag, e.g. the table or relay name
   */
  public MicrometerOutboxMetrics(MeterRegistry registry, String outbox) {
    Objects.requireNonNull(registry, "registry");
    Tags tags = Tags.of("outbox", Objects.requireNonNull(outbox, "outbox"));
    published = Counter.builder(PUBLISHED).tags(tags).description("Outbox messages confirmed and marked sent").register(registry);
    failed = Counter.builder(FAILED).tags(tags).description("Failed outbox publish attempts").register(registry);
    parkedTotal = Counter.builder(PARKED_TOTAL).tags(tags).description("Outbox rows parked by this relay").register(registry);
    delay = Timer.builder(DELAY).tags(tags).publishPercentiles(0.5, 0.95, 0.99).description("Outbox row creation to sent")
        .register(registry);
    Gauge.builder(UNSENT, this, m -> m.last.pending()).tags(tags).description("Pending outbox rows").register(registry);
    Gauge.builder(OLDEST_UNSENT_AGE, this, m -> m.last.oldestPendingAge().toMillis() / 1000.0).tags(tags).baseUnit("seconds")
        .description("Age of the oldest pending outbox row").register(registry);
    Gauge.builder(PARKED, this, m -> m.last.parked()).tags(tags).description("Parked outbox rows").register(registry);
  }

  @Override
  public void published(OutboxMessage message, Duration sinceCreated) {
    published.increment();
    delay.record(sinceCreated.isNegative() ? Duration.ZERO : sinceCreated);
  }

  @Override
  public void failed(OutboxMessage message, Throwable error) {
    failed.increment();
  }

  @Override
  public void parked(OutboxMessage message) {
    parkedTotal.increment();
  }

  @Override
  public void stats(OutboxStats stats) {
    last = stats;
  }
}
