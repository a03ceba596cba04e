package dev.idem.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * An application instance that starts while others consume: {@code createSchemaIfAbsent()} on a
 * schema that exists must not queue behind their open transactions (nor make them queue behind
 * it), as a {@code CREATE INDEX IF NOT EXISTS} would.
 */
class SchemaCreationIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private String schema;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(3);
    schema = PostgresService.uniqueName("schema_creation");
    postgres.execute("CREATE SCHEMA " + schema);
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP SCHEMA " + schema + " CASCADE");
    pool.dispose();
  }

  @Test
  void anExistingSchemaIsFoundWithoutWaitingForTheTransactionsThatWriteIt() {
    PostgresInbox inbox = PostgresInbox.create(pool, schema + ".inbox");
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    Connection writer = Mono.from(pool.create()).block(TIMEOUT);
    try {
      // A consumer's transaction that recorded a message and has not committed yet.
      Mono.from(writer.beginTransaction()).then(inbox.record(writer, "running-consumer", "m-1")).block(TIMEOUT);
      // Must not wait for it: with a SHARE lock request queued behind it, this would time out.
      inbox.createSchemaIfAbsent().block(TIMEOUT);
      Mono.from(writer.commitTransaction()).block(TIMEOUT);
    } finally {
      Mono.from(writer.close()).block(TIMEOUT);
    }
    assertThat(postgres.count("SELECT count(*) FROM " + schema + ".inbox")).isEqualTo(1);
  }

  @Test
  void aMissingIndexIsStillCreated() {
    PostgresInbox inbox = PostgresInbox.create(pool, schema + ".inbox");
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    postgres.execute("DROP INDEX " + schema + ".inbox_processed_at_idx");
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    assertThat(postgres.count("SELECT count(*) FROM pg_indexes WHERE schemaname = '" + schema
        + "' AND indexname = 'inbox_processed_at_idx'")).isEqualTo(1);
  }
}
