package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Idem's contract through primary switches of a real pg_auto_failover formation ({@link Formation}),
 * with RabbitMQ messages flowing to three consumers at once (a per-message handler and a batch
 * handler with default batching, and one transaction per message), each on a pool over the
 * multi-host URL {@code r2dbc:postgresql:failover://...?targetServerType=primary}. After each
 * switch: every message settled, each id applied exactly once on the new primary, every
 * acknowledged id there, only the poison messages dead-lettered (a failover error never spends a
 * message's attempts), nothing left on the queues. The time from the switch to the first commit
 * on the new primary is printed.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class PostgresFailoverIntegrationTests {

  private final Formation formation = Formation.get();

  @BeforeEach
  void healthyFormation() {
    formation.awaitHealthy();
  }

  @Test
  @Order(1)
  void aPlannedSwitchLosesNothingAndAppliesNothingTwice() throws Exception {
    try (SwitchWorkload workload = new SwitchWorkload(formation)) {
      workload.start();
      workload.awaitProcessedSince(0, 200, "messages flowing before the switch");
      String oldPrimary = formation.primary();
      long triggered = System.nanoTime();
      CompletableFuture<Long> newPrimary = newPrimaryWritable(Formation.other(oldPrimary));
      formation.performFailover();
      long promoted = newPrimary.get();
      workload.awaitProcessedSince(promoted, 200, "messages flowing on the new primary");
      workload.assertExactlyOnce();
      assertThat(formation.primary()).isEqualTo(Formation.other(oldPrimary));
      workload.report("planned switch (pg_autoctl perform failover)", triggered, promoted);
    }
  }

  @Test
  @Order(2)
  void aCrashOfThePrimaryLosesNothingAndAppliesNothingTwiceAndItRejoinsAsStandby() throws Exception {
    try (SwitchWorkload workload = new SwitchWorkload(formation)) {
      workload.start();
      workload.awaitProcessedSince(0, 200, "messages flowing before the crash");
      String oldPrimary = formation.primary();
      long triggered = System.nanoTime();
      CompletableFuture<Long> newPrimary = newPrimaryWritable(Formation.other(oldPrimary));
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
    }
  }

  /** When {@code node} first answers as a writable primary (System.nanoTime()), polled in the background. */
  private CompletableFuture<Long> newPrimaryWritable(String node) {
    return CompletableFuture.supplyAsync(() -> {
      Awaitility.await(node + " writable").atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(50))
          .until(() -> formation.writable(node));
      return System.nanoTime();
    });
  }
}
