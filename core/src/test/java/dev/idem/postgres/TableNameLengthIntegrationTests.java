package dev.idem.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.testing.OutboxTesting;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The longest table names the inbox, the rotating inbox and the outbox accept work end to end on
 * the real PostgreSQL: createSchemaIfAbsent creates every derived object under its exact,
 * untruncated name (PostgreSQL truncates identifiers over 63 bytes, and with IF NOT EXISTS a
 * truncated index or partition name that collides would be skipped silently), and the tables
 * work. One character more is refused when the inbox or outbox is built, before any SQL runs.
 */
class TableNameLengthIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private String schema;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(2);
    schema = PostgresService.uniqueName("names");
    postgres.execute("CREATE SCHEMA " + schema);
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP SCHEMA " + schema + " CASCADE");
    pool.dispose();
  }

  /** A name of exactly {@code length} characters, starting with {@code prefix}. */
  private static String named(String prefix, int length) {
    return prefix + "x".repeat(length - prefix.length());
  }

  private boolean record(PostgresInbox inbox, String messageId) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.beginTransaction()).then(inbox.record(c, "consumer", messageId))
            .flatMap(inserted -> Mono.from(c.commitTransaction()).thenReturn(inserted)),
        Connection::close).block(TIMEOUT);
  }

  private List<Object> relations(String kind) {
    return postgres.column("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        + " WHERE n.nspname = $1 AND c.relkind = $2 ORDER BY c.relname", schema, kind);
  }

  @Test
  void longestPlainInboxTableWorksEndToEndAndOneMoreCharacterIsRefusedWhenBuilt() {
    String base = named("inbox_", PostgresInbox.MAX_TABLE_NAME_LENGTH);
    PostgresInbox inbox = PostgresInbox.create(pool, schema + "." + base);

    inbox.createSchemaIfAbsent().block(TIMEOUT);
    inbox.createSchemaIfAbsent().block(TIMEOUT);

    assertThat(relations("i")).contains(base + "_processed_at_idx");
    assertThat(base + "_processed_at_idx").hasSize(63);
    assertThat(record(inbox, "m-1")).isTrue();
    assertThat(record(inbox, "m-1")).isFalse();

    String tooLong = base + "x";
    assertThatThrownBy(() -> PostgresInbox.create(pool, schema + "." + tooLong))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the name " + tooLong + "_processed_at_idx derived from it would be 64 bytes")
        .hasMessageContaining("63 bytes")
        .hasMessageContaining("at most 46 characters");
    assertThat(relations("r")).containsExactly(base);
  }

  @Test
  void longestUnqualifiedInboxTableWorksEndToEnd() {
    String base = named(PostgresService.uniqueName("inbox"), PostgresInbox.MAX_TABLE_NAME_LENGTH);
    PostgresInbox inbox = PostgresInbox.create(pool, base);
    try {
      inbox.createSchemaIfAbsent().block(TIMEOUT);

      assertThat(postgres.column("SELECT indexname FROM pg_indexes WHERE tablename = $1 ORDER BY indexname", base))
          .containsExactly(base + "_pkey", base + "_processed_at_idx");
      assertThat(record(inbox, "m-1")).isTrue();
      assertThat(record(inbox, "m-1")).isFalse();
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + base);
    }
  }

  @Test
  void longestRotatingInboxTableWithTheMostSlotsWorksEndToEndAndOneMoreCharacterIsRefusedWhenBuilt() {
    String base = named("rotating_", PostgresInbox.MAX_ROTATING_TABLE_NAME_LENGTH);
    PostgresInbox inbox = PostgresInbox.rotating(pool, schema + "." + base, Duration.ofHours(1), 1_000);
    int slots = inbox.rotatingLayout().slots();

    inbox.createSchemaIfAbsent().block(TIMEOUT);
    inbox.createSchemaIfAbsent().block(TIMEOUT);

    assertThat(relations("r")).contains(base + "_layout");
    assertThat(base + "_layout").hasSize(63);
    assertThat(postgres
        .column("SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1", schema))
        .containsExactly(base + "_record");
    assertThat(postgres.count("SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass", schema + "." + base))
        .isEqualTo(slots);
    for (int slot = 0; slot < slots; slot++) {
      assertThat(postgres.count("SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass AND inhrelid = $2::regclass",
          schema + "." + base, inbox.slotPartition(slot))).as("partition of slot %d", slot).isEqualTo(1);
    }
    assertThat(record(inbox, "m-1")).isTrue();
    assertThat(record(inbox, "m-1")).isFalse();

    String tooLong = base + "x";
    assertThatThrownBy(() -> PostgresInbox.rotating(pool, schema + "." + tooLong, Duration.ofHours(1), 1_000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the name " + tooLong + "_")
        .hasMessageContaining("derived from it would be 64 bytes, over PostgreSQL's identifier limit of 63 bytes")
        .hasMessageContaining("at most 56 characters");
  }

  @Test
  void longestOutboxTableWorksEndToEndAndOneMoreCharacterIsRefusedWhenBuilt() {
    String base = named("outbox_", PostgresOutbox.MAX_TABLE_NAME_LENGTH);
    PostgresOutbox outbox = PostgresOutbox.create(pool, schema + "." + base);

    outbox.createSchemaIfAbsent().block(TIMEOUT);
    outbox.createSchemaIfAbsent().block(TIMEOUT);

    assertThat(relations("i")).contains(base + "_key_idx", base + "_parked_idx", base + "_pending_idx", base + "_sent_at_idx");
    assertThat(base + "_pending_idx").hasSize(63);
    List<String> ids = OutboxTesting.write(pool, outbox,
        List.of(OutboxRecord.to("payments").key("k").payload("hello".getBytes(StandardCharsets.UTF_8)).build()));
    assertThat(OutboxTesting.rows(postgres, outbox, "PENDING")).isEqualTo(1);
    assertThat(postgres.column("SELECT message_id FROM " + outbox.table())).isEqualTo(ids);

    String tooLong = base + "x";
    assertThatThrownBy(() -> PostgresOutbox.create(pool, schema + "." + tooLong))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the name " + tooLong + "_")
        .hasMessageContaining("_idx derived from it would be 64 bytes, over PostgreSQL's identifier limit of 63 bytes")
        .hasMessageContaining("at most 51 characters");
  }
}
