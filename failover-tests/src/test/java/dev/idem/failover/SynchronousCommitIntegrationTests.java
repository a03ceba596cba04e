package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/**
 * A COMMIT that waits for synchronous replication is never cut short by Idem. PostgreSQL ends
 * such a wait when the session receives a cancel request, and then the COMMIT succeeds with the
 * transaction committed on the primary alone: visible there, so the message's retry finds its
 * dedup row and acknowledges it, while no standby has the effect and a failover would drop it.
 * Here no standby confirms anything (their WAL receivers stopped with SIGSTOP) while a message's
 * transaction times out again and again: its COMMIT goes on waiting on the primary, nothing is
 * visible or acknowledged, and once the standbys confirm again the message is applied once.
 */
class SynchronousCommitIntegrationTests {

  private final Formation formation = Formation.get();

  @Test
  void aTransactionTimeoutNeverCancelsACommitThatWaitsForTheStandbys() {
    formation.awaitHealthy();
    String primary = formation.primary();
    String effects = PostgresService.uniqueName("sync_effects");
    Formation.query(formation.failoverUrl(), "CREATE TABLE " + effects + " (message_id text NOT NULL)");
    ConnectionPool pool = PostgresConnections.pool(formation.failoverUrl(), 4);
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("sync_inbox"));
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
    TestDelivery<String> delivery = TestDelivery.of("s-1", "payment");
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    Disposable consumer = null;
    formation.pauseWalReceivers(true);
    try {
      consumer = IdempotentConsumer.<String>named(PostgresService.uniqueName("sync_commit")).inbox(inbox)
          .transactionTimeout(Duration.ofSeconds(2))
          .handler(
              (payload, tx) -> tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute())
          .build().process(Flux.just(delivery).concatWith(Flux.never())).subscribe(outcomes::add);

      // Its COMMIT still waits for a standby well past the 2 s transaction timeout: not cancelled.
      Awaitility.await("a COMMIT waiting for synchronous replication for more than 6 s").atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> !"0".equals(Formation.query(formation.nodeUrl(primary), "SELECT count(*)::text FROM pg_stat_activity"
              + " WHERE wait_event = 'SyncRep' AND query = 'COMMIT' AND now() - query_start > interval '6 s'")));
      assertThat(Formation.query(formation.nodeUrl(primary), "SELECT count(*)::text FROM " + effects))
          .as("effect rows visible on the primary while no standby has confirmed them").isEqualTo("0");
      assertThat(delivery.ackCount()).as("acks while no standby has confirmed the effect").isZero();
      assertThat(outcomes).as("outcomes while no standby has confirmed the effect").isEmpty();
    } finally {
      formation.pauseWalReceivers(false);
    }
    try {
      Awaitility.await("the message settled once the standbys confirm").atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200)).until(() -> outcomes.size() == 1);
      assertThat(outcomes.get(0).status()).isIn(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE);
      assertThat(delivery.ackCount()).as("acks").isEqualTo(1);
      assertThat(Formation.query(formation.failoverUrl(), "SELECT count(*)::text FROM " + effects)).as("effect rows")
          .isEqualTo("1");
      // And the standbys have it: the commit was confirmed, not cut short.
      for (String standby : Formation.others(primary)) {
        Awaitility.await(standby + " replays the effect").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200))
            .until(() -> "1".equals(Formation.query(formation.nodeUrl(standby), "SELECT count(*)::text FROM " + effects)));
      }
    } finally {
      if (consumer != null) {
        consumer.dispose();
      }
      pool.dispose();
    }
  }
}
