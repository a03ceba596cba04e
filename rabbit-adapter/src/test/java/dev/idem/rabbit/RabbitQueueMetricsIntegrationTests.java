package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.rabbit.testing.RabbitService;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class RabbitQueueMetricsIntegrationTests {

  @Test
  void gaugesReportQueueDepthsAndUnsettledDeliveries() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_metrics", RabbitTopology.QueueType.CLASSIC)) {
      f.rabbit.publish(f.queue,
          List.of(RabbitService.message("a", "1"), RabbitService.message("b", "2"), RabbitService.message("c", "3")));
      RabbitSource<String> source = f.source(f.options().build());
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      try (RabbitQueueMetrics metrics = RabbitQueueMetrics.of(source, Duration.ofMillis(200),
          List.of(f.queue, f.deadLetterQueue, "no-such-queue-" + f.queue))) {
        metrics.bindTo(registry);
        await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
          assertThat(registry.get(RabbitQueueMetrics.QUEUE_READY).tag("queue", f.queue).gauge().value()).isEqualTo(3.0);
          assertThat(registry.get(RabbitQueueMetrics.QUEUE_READY).tag("queue", f.deadLetterQueue).gauge().value()).isZero();
        });
        assertThat(registry.get(RabbitQueueMetrics.QUEUE_READY).tag("queue", "no-such-queue-" + f.queue).gauge().value()).isNaN();
        assertThat(registry.get(RabbitQueueMetrics.UNSETTLED).gauge().value()).isZero();
      }
    }
  }
}
