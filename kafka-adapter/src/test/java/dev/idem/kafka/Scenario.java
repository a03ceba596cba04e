package dev.idem.kafka;

import dev.idem.Handler;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import dev.idem.kafka.testing.TestEngine;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.Map;

/**
 * One test's world: its own topic, consumer group, consumer name and business table on the
 * shared broker and database. The business table has no unique constraint, so a double effect
 * shows as two rows.
 */
final class Scenario implements AutoCloseable {

  final KafkaService kafka = KafkaService.get();
  final PostgresService pg = PostgresService.get();
  final String topic;
  final String group;
  final String consumer;
  final String table;
  final ConnectionPool pool;
  final PostgresInbox inbox;

  Scenario(String prefix, int partitions) {
    String name = KafkaService.uniqueName(prefix);
    this.topic = name + "_topic";
    this.group = name + "_group";
    this.consumer = name + "_consumer";
    this.table = name + "_effects";
    kafka.createTopic(topic, partitions);
    pg.execute("CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, message_id text NOT NULL, payload text NOT NULL, "
        + "at timestamptz NOT NULL DEFAULT clock_timestamp())");
    this.pool = pg.pool(16);
    this.inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
  }

  KafkaSourceOptions.Builder<String> options() {
    return TestEngine.apply(KafkaSourceOptions.<String>builder())
        .bootstrapServers(kafka.bootstrapServers())
        .groupId(group)
        .topics(topic)
        .valueDeserializer(new StrictUtf8Deserializer())
        .commitInterval(Duration.ofMillis(200))
        .revocationGracePeriod(Duration.ofSeconds(3))
        .closeTimeout(Duration.ofSeconds(5));
  }

  /** Inserts one effect row per message. */
  Handler<String> recordingHandler() {
    return (payload, tx) -> tx.sql("INSERT INTO " + table + " (message_id, payload) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, payload).execute();
  }

  long effects() {
    return pg.count("SELECT count(*) FROM " + table);
  }

  long distinctEffects() {
    return pg.count("SELECT count(DISTINCT message_id) FROM " + table);
  }

  Map<Integer, Long> committed() {
    return kafka.committedOffsets(group, topic);
  }

  Map<Integer, Long> end() {
    return kafka.endOffsets(topic);
  }

  @Override
  public void close() {
    // Leave the shared database as it was: this test's business table and its dedup rows go.
    pg.execute("DROP TABLE IF EXISTS " + table, "DELETE FROM " + inbox.table() + " WHERE consumer = '" + consumer + "'");
    pool.dispose();
  }
}
