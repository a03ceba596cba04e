package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.micrometer.MicrometerConsumerMetrics;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The meters after a known sequence of deliveries, on a real PostgreSQL. */
class MicrometerMetricsIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private final PostgresService postgres = PostgresService.get();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    consumer = PostgresService.uniqueName("metrics");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  private double counter(String name, String tag, String value) {
    return registry.get(name).tag("consumer", consumer).tag(tag, value).counter().count();
  }

  private double gauge(String name) {
    return registry.get(name).tag("consumer", consumer).gauge().value();
  }

  @Test
  void metersCountOutcomesRetriesAndLatencies() {
    AtomicInteger calls = new AtomicInteger();
    Handler<String> failsOnceForM2 = (payload, tx) -> "m-2".equals(tx.messageId()) && calls.incrementAndGet() == 1
        ? Mono.error(new IllegalStateException("once"))
        : Mono.empty();
    IdempotentConsumer<String> idem = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(failsOnceForM2)
        .retry(RetryPolicy.backoff(3, Duration.ofMillis(5)))
        .metrics(new MicrometerConsumerMetrics(registry, consumer)).build();
    TestDelivery<String> m1 = TestDelivery.of("m-1", "a");

    idem.process(Flux.just(m1, m1.redelivered(), TestDelivery.of(null, "no id"), TestDelivery.of("m-2", "b")))
        .blockLast(TIMEOUT);

    assertThat(counter(MicrometerConsumerMetrics.MESSAGES, "outcome", "processed")).isEqualTo(2);
    assertThat(counter(MicrometerConsumerMetrics.MESSAGES, "outcome", "duplicate")).isEqualTo(1);
    assertThat(counter(MicrometerConsumerMetrics.MESSAGES, "outcome", "dead_lettered")).isEqualTo(1);
    assertThat(counter(MicrometerConsumerMetrics.RETRIES, "kind", "retryable")).isEqualTo(1);
    assertThat(counter(MicrometerConsumerMetrics.RETRIES, "kind", "infrastructure")).isZero();
    assertThat(registry.get(MicrometerConsumerMetrics.HANDLER).tag("consumer", consumer).timer().count()).isEqualTo(2);
    assertThat(
        registry.get(MicrometerConsumerMetrics.TRANSACTION).tag("consumer", consumer).tag("committed", "true").timer().count())
        .isEqualTo(3);
    assertThat(
        registry.get(MicrometerConsumerMetrics.TRANSACTION).tag("consumer", consumer).tag("committed", "false").timer().count())
        .isEqualTo(1);
    assertThat(gauge(MicrometerConsumerMetrics.IN_FLIGHT)).isZero();
    assertThat(gauge(MicrometerConsumerMetrics.UNSETTLED)).isZero();
    assertThat(gauge(MicrometerConsumerMetrics.OLDEST_AGE)).isZero();
    // Every message went through exactly one batch a lane formed; the retry of m-2 is not a new one.
    DistributionSummary batches = registry.get(MicrometerConsumerMetrics.BATCH_SIZE).tag("consumer", consumer).summary();
    assertThat(batches.totalAmount()).isEqualTo(4);
    assertThat(batches.count()).isBetween(1L, 4L);
  }

  @Test
  void oldestUnsettledAgeGrowsWhileAMessageIsStuckAndBacklogIsVisible() {
    Sinks.Empty<Void> gate = Sinks.empty();
    Handler<String> stuck = (payload, tx) -> gate.asMono();
    IdempotentConsumer<String> idem = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(stuck)
        .concurrency(1).prefetch(4).metrics(new MicrometerConsumerMetrics(registry, consumer)).build();

    Disposable running = idem.process(Flux.range(0, 100).map(i -> TestDelivery.of("m-" + i, "x"))).subscribe();
    try {
      await().atMost(TIMEOUT).untilAsserted(() -> {
        assertThat(gauge(MicrometerConsumerMetrics.IN_FLIGHT)).isEqualTo(1);
        assertThat(gauge(MicrometerConsumerMetrics.UNSETTLED)).isGreaterThan(1).isLessThanOrEqualTo(1 + 4);
        assertThat(gauge(MicrometerConsumerMetrics.OLDEST_AGE)).isGreaterThan(0.2);
      });
    } finally {
      running.dispose();
    }
    await().atMost(TIMEOUT).untilAsserted(() -> assertThat(gauge(MicrometerConsumerMetrics.IN_FLIGHT)).isZero());
    assertThat(registry.get(MicrometerConsumerMetrics.ABANDONED).tag("consumer", consumer).counter().count())
        .isGreaterThanOrEqualTo(1);
  }
}
