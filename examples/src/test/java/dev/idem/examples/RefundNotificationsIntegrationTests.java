package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.examples.refunds.RefundNotificationsExample;
import org.junit.jupiter.api.Test;

/**
 * Seed 2 end to end on the real services: each refund event is delivered three times; one refund
 * row and one notification outbox row per refund; the relay publishes each notification with the
 * row's id; the downstream sender applies each notification once.
 */
class RefundNotificationsIntegrationTests {

  private static void assertOneRefundAndOneNotificationEach(RefundNotificationsExample.Report report, int refunds) {
    assertThat(report.refunds()).isEqualTo(refunds);
    assertThat(report.delivered()).isEqualTo(3L * refunds);
    assertThat(report.refundRows()).isEqualTo(refunds);
    assertThat(report.duplicates()).isEqualTo(2L * refunds);
    assertThat(report.outboxRows()).isEqualTo(refunds);
    assertThat(report.relayed()).isEqualTo(refunds);
    assertThat(report.notificationsApplied()).isEqualTo(refunds);
    assertThat(report.distinctNotificationIds()).isEqualTo(refunds);
    assertThat(report.mostNotificationsPerRefund()).isEqualTo(1);
    assertThat(report.ok()).isTrue();
  }

  @Test
  void refundDeliveredThreeTimesGivesOneRefundAndOneNotificationAppliedOnceThroughRabbitmq() {
    RefundNotificationsExample.Report report = RefundNotificationsExample.run(
        ExamplesIntegrationTests.environment("--broker=rabbit", "--rabbit=" + DemoEnvironment.fromArgs().rabbitUri(),
            "--refunds=60"));

    assertOneRefundAndOneNotificationEach(report, 60);
  }

  @Test
  void refundDeliveredThreeTimesGivesOneRefundAndOneNotificationAppliedOnceThroughKafka() {
    RefundNotificationsExample.Report report = RefundNotificationsExample.run(
        ExamplesIntegrationTests.environment("--broker=kafka", "--refunds=60"));

    assertOneRefundAndOneNotificationEach(report, 60);
  }
}
