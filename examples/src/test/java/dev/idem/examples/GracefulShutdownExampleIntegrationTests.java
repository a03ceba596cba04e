package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.examples.shutdown.GracefulShutdownExample;
import org.junit.jupiter.api.Test;

/** The graceful shutdown, metadata and tracing snippets of docs/operating.md, run against the real RabbitMQ and PostgreSQL. */
class GracefulShutdownExampleIntegrationTests {

  @Test
  void aGracefulStopMidStreamRollsNothingBackAndTheNextRunAppliesTheRestOnceWithItsMetadata() {
    GracefulShutdownExample.Report report = GracefulShutdownExample.run(
        ExamplesIntegrationTests.environment("--rabbit=" + DemoEnvironment.fromArgs().rabbitUri(), "--payments=150"));

    assertThat(report.firstRun().abandonedInFlight()).isZero();
    assertThat(report.firstRun().withinGracePeriod()).isTrue();
    assertThat(report.rows()).isEqualTo(150);
    assertThat(report.distinct()).isEqualTo(150);
    assertThat(report.withMetadata()).isEqualTo(150);
    assertThat(report.ok()).isTrue();
  }
}
