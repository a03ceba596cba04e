package dev.idem.micrometer;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.ErrorKind;
import dev.idem.Outcome;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Collections;
import java.util.EnumMap;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Publishes a consumer's work to a Micrometer registry. Every meter carries the tag
 * {@code consumer}.
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>type</th><th>meaning</th></tr>
 *   <tr><td>{@value #MESSAGES}</td><td>counter, tag {@code outcome} = processed | duplicate | dead_lettered</td>
 *       <td>settled messages by outcome</td></tr>
 *   <tr><td>{@value #RETRIES}</td><td>counter, tag {@code kind} = retryable | contention | infrastructure</td>
 *       <td>failed attempts that were retried</td></tr>
 *   <tr><td>{@value #ABANDONED}</td><td>counter</td>
 *       <td>messages left unsettled for redelivery (cancelled, or the ack failed)</td></tr>
 *   <tr><td>{@value #SETTLEMENT_FAILURES}</td><td>counter, tag {@code step} = ack | dead-letter</td>
 *       <td>settlements the broker adapter could not complete (a dead letter that cannot be
 *       delivered is also logged at ERROR)</td></tr>
 *   <tr><td>{@value #HANDLER}</td><td>timer with p50/p95/p99</td><td>time in the user's handler</td></tr>
 *   <tr><td>{@value #TRANSACTION}</td><td>timer with p50/p95/p99, tag {@code committed}</td>
 *       <td>whole transaction: dedup insert, handler, commit</td></tr>
 *   <tr><td>{@value #BATCH_SIZE}</td><td>distribution summary with p50/p95/p99, messages</td>
 *       <td>messages per micro-batch a lane formed (1 with {@code maxBatchSize(1)})</td></tr>
 *   <tr><td>{@value #IN_FLIGHT}</td><td>gauge</td><td>messages being processed now</td></tr>
 *   <tr><td>{@value #UNSETTLED}</td><td>gauge</td><td>messages received but not settled (buffered or in flight)</td></tr>
 *   <tr><td>{@value #OLDEST_AGE}</td><td>gauge, seconds</td>
 *       <td>age of the oldest unsettled message; grows while a backlog or a stuck message waits,
 *       even when CPU stays low</td></tr>
 * </table>
 *
 * <p>Thread-safe. Its bookkeeping is bounded by the pipeline's own bounds (prefetch plus
 * concurrency), so it never grows with the backlog.
 */
public final class MicrometerConsumerMetrics implements ConsumerMetrics {

  /** Settled messages by outcome. */
  public static final String MESSAGES = "idem.messages";
  /** Retried attempts by error kind. */
  public static final String RETRIES = "idem.retries";
  /** Messages left for redelivery. */
  public static final String ABANDONED = "idem.abandoned";
  /** Settlements that failed for good, by step. */
  public static final String SETTLEMENT_FAILURES = "idem.settlement.failures";
  /** Handler latency. */
  public static final String HANDLER = "idem.handler";
  /** Transaction latency. */
  public static final String TRANSACTION = "idem.transaction";
  /** Messages in flight. */
  public static final String IN_FLIGHT = "idem.in.flight";
  /** Messages received and not settled. */
  public static final String UNSETTLED = "idem.unsettled";
  /** Age of the oldest unsettled message in seconds. */
  public static final String OLDEST_AGE = "idem.oldest.unsettled.age";
  /** Messages per micro-batch a lane formed (distribution summary, p50/p95/p99). */
  public static final String BATCH_SIZE = "idem.batch.size";

  private final Map<Outcome.Status, Counter> outcomes = new EnumMap<>(Outcome.Status.class);
  private final Counter retryable;
  private final Counter infrastructure;
  private final Counter contention;
  private final Counter ackFailures;
  private final Counter deadLetterFailures;
  private final Counter abandoned;
  private final Timer handler;
  private final Timer committed;
  private final Timer rolledBack;
  private final DistributionSummary batchSize;
  private final Map<Delivery<?>, Long> receivedAt = Collections.synchronizedMap(new IdentityHashMap<>());
  private final Set<Delivery<?>> inFlight = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

  /**
   * Registers the meters of one consumer.
   *
   * @param registry the registry
   * @param consumer the consumer name, used as the {@code consumer} tag
   */
  public MicrometerConsumerMetrics(MeterRegistry registry, String consumer) {
    Objects.requireNonNull(registry, "registry");
    Tags tags = Tags.of("consumer", Objects.requireNonNull(consumer, "consumer"));
    for (Outcome.Status status : Outcome.Status.values()) {
      outcomes.put(status, Counter.builder(MESSAGES).tags(tags).tag("outcome", status.name().toLowerCase(Locale.ROOT))
          .description("Settled messages by outcome").register(registry));
    }
    retryable = Counter.builder(RETRIES).tags(tags).tag("kind", "retryable").description("Retried attempts").register(registry);
    infrastructure = Counter.builder(RETRIES).tags(tags).tag("kind", "infrastructure").description("Retried attempts")
        .register(registry);
    contention = Counter.builder(RETRIES).tags(tags).tag("kind", "contention").description("Retried attempts").register(registry);
    ackFailures = Counter.builder(SETTLEMENT_FAILURES).tags(tags).tag("step", "ack")
        .description("Settlements that failed for good").register(registry);
    deadLetterFailures = Counter.builder(SETTLEMENT_FAILURES).tags(tags).tag("step", "dead-letter")
        .description("Settlements that failed for good").register(registry);
    abandoned = Counter.builder(ABANDONED).tags(tags).description("Messages left unsettled for redelivery").register(registry);
    handler = Timer.builder(HANDLER).tags(tags).publishPercentiles(0.5, 0.95, 0.99).description("Handler latency")
        .register(registry);
    committed = Timer.builder(TRANSACTION).tags(tags).tag("committed", "true").publishPercentiles(0.5, 0.95, 0.99)
        .description("Transaction latency").register(registry);
    rolledBack = Timer.builder(TRANSACTION).tags(tags).tag("committed", "false").publishPercentiles(0.5, 0.95, 0.99)
        .description("Transaction latency").register(registry);
    batchSize = DistributionSummary.builder(BATCH_SIZE).tags(tags).publishPercentiles(0.5, 0.95, 0.99).baseUnit("messages")
        .description("Messages per micro-batch a lane formed").register(registry);
    Gauge.builder(IN_FLIGHT, inFlight, Set::size).tags(tags).description("Messages being processed").register(registry);
    Gauge.builder(UNSETTLED, receivedAt, Map::size).tags(tags).description("Messages received and not settled")
        .register(registry);
    Gauge.builder(OLDEST_AGE, this, MicrometerConsumerMetrics::oldestUnsettledAgeSeconds).tags(tags)
        .baseUnit("seconds").description("Age of the oldest unsettled message").register(registry);
  }

  @Override
  public void received(Delivery<?> delivery) {
    receivedAt.put(delivery, System.nanoTime());
  }

  @Override
  public void started(Delivery<?> delivery) {
    inFlight.add(delivery);
  }

  @Override
  public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
    (kind == ErrorKind.INFRASTRUCTURE ? infrastructure : kind == ErrorKind.CONTENTION ? contention : retryable).increment();
  }

  @Override
  public void settlementFailed(Delivery<?> delivery, String step, Throwable error) {
    ("ack".equals(step) ? ackFailures : deadLetterFailures).increment();
  }

  @Override
  public void transaction(Delivery<?> delivery, Duration duration, boolean wasCommitted) {
    (wasCommitted ? committed : rolledBack).record(duration);
  }

  @Override
  public void batch(int messages) {
    batchSize.record(messages);
  }

  @Override
  public void handler(Delivery<?> delivery, Duration duration) {
    handler.record(duration);
  }

  @Override
  public void settled(Outcome<?> outcome) {
    Objects.requireNonNull(outcomes.get(outcome.status())).increment();
    forget(outcome.delivery());
  }

  @Override
  public void abandoned(Delivery<?> delivery) {
    if (forget(delivery)) {
      abandoned.increment();
    }
  }

  private boolean forget(Delivery<?> delivery) {
    inFlight.remove(delivery);
    return receivedAt.remove(delivery) != null;
  }

  private double oldestUnsettledAgeSeconds() {
    long now = System.nanoTime();
    long oldest;
    synchronized (receivedAt) {
      oldest = receivedAt.values().stream().mapToLong(Long::longValue).min().orElse(now);
    }
    return (now - oldest) / 1e9;
  }
}
