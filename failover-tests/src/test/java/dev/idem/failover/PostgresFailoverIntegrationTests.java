package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Delivery;
import dev.idem.IdempotentConsumer;
import dev.idem.failover.Endpoint.Broker;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Idem's contract through primary switches of a real pg_auto_failover formation ({@link Formation},
 * one for the whole JVM), on each broker (RabbitMQ, Kafka: the switch tests are parameterised by
 * {@link Broker}), with messages flowing to three consumers at once (a per-message {@code Handler}
 * and a {@code BatchHandler} with default batching, and a {@code Handler} with one transaction per
 * message), each on a pool over the multi-host URL
 * {@code r2dbc:postgresql:failover://...?targetServerType=primary}. After each switch: every
 * message settled, each id applied exactly once on the new primary, every acknowledged id there,
 * only the poison messages dead-lettered (a failover error never spends a message's attempts),
 * nothing left for the consumer (RabbitMQ: the queues are empty; Kafka: the offsets are committed
 * to the end of every partition). The time from the switch to the first commit on the new primary
 * is printed, and each consumer logs the outage at WARN once. Last, the WARN a consumer logs at
 * start when the primary's standbys are all asynchronous.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class PostgresFailoverIntegrationTests {

  private final Formation formation = Formation.get();

  @BeforeEach
  void healthyFormation() {
    formation.awaitHealthy();
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Broker.class)
  @Order(1)
  void aPlannedSwitchLosesNothingAndAppliesNothingTwice(Broker broker) throws Exception {
    try (LogCapture logs = LogCapture.of(IdempotentConsumer.class);
        SwitchWorkload workload = new SwitchWorkload(formation, broker)) {
      workload.start();
      workload.awaitProcessedSince(0, 200, "messages flowing before the switch");
      String oldPrimary = formation.primary();
      long triggered = System.nanoTime();
      CompletableFuture<Long> newPrimary = newPrimaryWritable(oldPrimary);
      formation.performFailover();
      long promoted = newPrimary.get();
      workload.awaitProcessedSince(promoted, 200, "messages flowing on the new primary");
      workload.assertExactlyOnce();
      assertThat(formation.primary()).isNotEqualTo(oldPrimary);
      assertOneOutageWarningPerConsumer(workload, logs);
      workload.report("planned switch (pg_autoctl perform failover)", triggered, promoted);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Broker.class)
  @Order(2)
  void aCrashOfThePrimaryLosesNothingAndAppliesNothingTwiceAndItRejoinsAsStandby(Broker broker) throws Exception {
    try (LogCapture logs = LogCapture.of(IdempotentConsumer.class);
        SwitchWorkload workload = new SwitchWorkload(formation, broker)) {
      workload.start();
      workload.awaitProcessedSince(0, 200, "messages flowing before the crash");
      String oldPrimary = formation.primary();
      long triggered = System.nanoTime();
      CompletableFuture<Long> newPrimary = newPrimaryWritable(oldPrimary);
      formation.crash(oldPrimary);
      long promoted = newPrimary.get();
      workload.awaitProcessedSince(promoted, 200, "messages flowing on the new primary");
      workload.report("unplanned switch (SIGKILL of the primary's keeper and postmaster)", triggered, promoted);

      long rejoining = System.nanoTime();
      formation.restart(oldPrimary);
      formation.awaitHealthy();
      assertThat(formation.states().get(oldPrimary)[0]).isEqualTo("secondary");
      System.out.printf("the old primary rejoined as a synchronous standby in %.1f s%n", (System.nanoTime() - rejoining) / 1e9);
      workload.awaitProcessedSince(System.nanoTime(), 200, "messages flowing after the rejoin");
      workload.assertExactlyOnce();
      assertOneOutageWarningPerConsumer(workload, logs);
    }
  }

  @Test
  @Order(3)
  void aPrimaryWhoseStandbysAreAllAsynchronousIsWarnedAboutOnceWhenAConsumerStarts() {
    ConnectionPool pool = PostgresConnections.pool(formation.failoverUrl(), 2);
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("failover_inbox"));
    List<String> standbys = Formation.others(formation.primary());
    Disposable consumer = null;
    try (LogCapture logs = LogCapture.of(PostgresInbox.class)) {
      inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
      assertThat(inbox.checkReplication().block(Duration.ofSeconds(30))).as("synchronous replication").isFalse();

      // Both standbys out of the quorum: the monitor wants number_sync_standbys 0 first.
      formation.setNumberSyncStandbys(0);
      standbys.forEach(standby -> formation.setReplicationQuorum(standby, false));
      Awaitility.await("the standbys replicating asynchronously").atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> "async".equals(Formation.query(formation.nodeUrl(formation.primary()),
              "SELECT string_agg(DISTINCT sync_state, ',') FROM pg_stat_replication")));
      consumer = IdempotentConsumer.<String>named(PostgresService.uniqueName("async_check")).inbox(inbox)
          .handler((payload, tx) -> Mono.empty()).build().process(Flux.<Delivery<String>>never()).subscribe();
      Awaitility.await("the WARN").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100))
          .until(() -> logs.warnings(inbox.table(), "none is synchronous").size() == 1);
      assertThat(inbox.checkReplication().block(Duration.ofSeconds(30))).as("asynchronous replication").isTrue();
      assertThat(logs.warnings(inbox.table(), "none is synchronous")).as("logged once").hasSize(1)
          .allSatisfy(w -> assertThat(w).contains(standbys.size() + " standby(s)").contains("synchronous_standby_names = ''"));
    } finally {
      if (consumer != null) {
        consumer.dispose();
      }
      standbys.forEach(standby -> formation.setReplicationQuorum(standby, true));
      formation.awaitHealthy();
      Formation.query(formation.failoverUrl(), "DROP TABLE IF EXISTS " + inbox.table());
      pool.dispose();
    }
  }

  /** An outage is logged once per consumer, not once per message in flight (the other messages log at DEBUG). */
  private static void assertOneOutageWarningPerConsumer(SwitchWorkload workload, LogCapture logs) {
    for (SwitchWorkload.Lane lane : workload.lanes) {
      assertThat(logs.warnings("Consumer '" + lane.name + "'", "infrastructure unavailable"))
          .as(lane.label() + ": WARNs for the outage").hasSize(1);
    }
  }

  /** When a node other than {@code oldPrimary} first answers as a writable primary (System.nanoTime()), polled in the background. */
  private CompletableFuture<Long> newPrimaryWritable(String oldPrimary) {
    return CompletableFuture.supplyAsync(() -> {
      Awaitility.await("a node other than " + oldPrimary + " writable").atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(50))
          .until(() -> formation.writableOtherThan(oldPrimary).isPresent());
      return System.nanoTime();
    });
  }
}
