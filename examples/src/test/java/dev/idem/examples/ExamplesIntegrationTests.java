package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Outcome;
import dev.idem.examples.payments.PaymentsDemo;
import dev.idem.examples.replay.DeadLetterReplayExample;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.testing.PostgresService;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The examples run end to end against real services (PostgreSQL, Kafka, RabbitMQ) and their
 * reports hold up. The payments demo kills a real consumer process with SIGKILL.
 */
class ExamplesIntegrationTests {

  static DemoEnvironment environment(String... extra) {
    String[] base = {
        "--postgres=" + PostgresService.get().url(),
        "--kafka=" + KafkaService.get().bootstrapServers()};
    String[] all = new String[base.length + extra.length];
    System.arraycopy(base, 0, all, 0, base.length);
    System.arraycopy(extra, 0, all, base.length, extra.length);
    return DemoEnvironment.fromArgs(all);
  }

  @Test
  void paymentsDemoSurvivesAConsumerKilledWithSigkillWithOneEffectPerEvent() {
    PaymentsDemo.Report report = PaymentsDemo.run(environment("--events=600", "--accounts=20"));

    assertThat(report.events()).isEqualTo(600);
    assertThat(report.effects()).as("one ledger row per distinct event").isEqualTo(600);
    assertThat(report.crashedAfterEffects()).as("the first consumer was killed mid-stream").isBetween(1L, 599L);
    assertThat(report.duplicates()).as("at least the producer repeats are suppressed").isGreaterThanOrEqualTo(60);
    assertThat(report.deadLetters()).as("the poison pills, by id").isEqualTo(3);
    assertThat(report.deadLetterRecords()).as("a crash may publish a dead letter again").isGreaterThanOrEqualTo(3);
    assertThat(report.balancesMatch()).isTrue();
    assertThat(report.offsetsAtEnd()).isTrue();
    assertThat(report.ok()).isTrue();
  }

  @Test
  void deadLetterReplayAppliesTheFixedMessageOnceAndASecondReplayIsADuplicate() {
    DeadLetterReplayExample.Report report = DeadLetterReplayExample.run(environment());

    assertThat(report.firstOutcome()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(report.replayed()).isEqualTo(List.of(1L, 1L));
    assertThat(report.afterFirstReplay()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(report.afterSecondReplay()).isEqualTo(Outcome.Status.DUPLICATE);
    assertThat(report.effects()).isEqualTo(1);
  }

  @Test
  void theEmbeddedDefaultStartsAPostgresqlWhenNoneIsConfigured() {
    String url = DemoEnvironment.fromArgs().postgresUrl();
    long one = PostgresServiceLike.count(url, "SELECT 1");
    assertThat(url).startsWith("r2dbc:postgresql://postgres@localhost:");
    assertThat(one).isEqualTo(1);
  }
}
