package dev.idem.postgres;

import dev.idem.internal.Identifiers;
import dev.idem.internal.SqlScripts;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The inbox table ({@code processed_messages} by default) over R2DBC PostgreSQL: the arbiter of
 * "has this consumer already applied this message?".
 *
 * <p>Guarantees: {@link #record} inserts with {@code ON CONFLICT DO NOTHING}, so a duplicate is
 * detected without aborting the transaction, and concurrent deliveries of one id serialise on
 * the primary key: the second waits for the first to commit or roll back. The table name is
 * validated as a plain (optionally schema-qualified) SQL identifier, short enough that every name
 * derived from it fits PostgreSQL's 63-byte identifier limit: at most
 * {@value #MAX_TABLE_NAME_LENGTH} characters for the plain table (its index
 * {@code <table>_processed_at_idx}), {@value #MAX_ROTATING_TABLE_NAME_LENGTH} for the rotating
 * layout ({@code <table>_layout}, {@code <table>_record}, {@code <table>_p0}...), not counting a
 * schema. A longer name is refused when the inbox is built, naming the derived name and the limit,
 * rather than truncated by PostgreSQL when the schema is created.
 *
 * <p>Immutable and thread-safe. The schema ships as
 * {@code db/idem/V1__idem_processed_messages.sql} for Flyway or Liquibase;
 * {@link #createSchemaIfAbsent()} runs it for quick starts.
 */
public final class PostgresInbox {

  /** The default table name: {@value}. */
  public static final String DEFAULT_TABLE = "processed_messages";
  /** The migration on the classpath. */
  public static final String MIGRATION_RESOURCE = "/db/idem/V1__idem_processed_messages.sql";
  /** The rotating layout's migration on the classpath. */
  public static final String ROTATING_MIGRATION_RESOURCE = "/db/idem/rotating/V1__idem_processed_messages_rotating.sql";
  /**
   * The longest table name (without its schema) of the plain inbox: {@value}, so that its index
   * {@code <table>_processed_at_idx} fits PostgreSQL's 63-byte identifier limit.
   */
  public static final int MAX_TABLE_NAME_LENGTH = 46;
  /**
   * The longest table name (without its schema) of the rotating inbox: {@value}, so that
   * {@code <table>_layout} and {@code <table>_record} (and the slot partitions
   * {@code <table>_p<slot>}, at most {@code _p1001}) fit PostgreSQL's 63-byte identifier limit.
   */
  public static final int MAX_ROTATING_TABLE_NAME_LENGTH = 56;
  /** Rows removed per statement by {@link #purgeOlderThan}: {@value}. */
  public static final int PURGE_BATCH_SIZE = 5_000;

  /**
   * The transaction-local setting that a pipelined {@code BEGIN} sets to {@code on} and that
   * {@link #recordPipelined} requires: {@value}.
   */
  public static final String IN_TRANSACTION_SETTING = "idem.in_transaction";

  private static final String ROTATING_TEMPLATE_TABLE = "processed_messages_rotating";
  private static final Pattern TEMPLATE_NAMES = Pattern.compile("\\b(processed_messages_processed_at_idx|processed_messages)\\b");

  private final ConnectionFactory connectionFactory;
  private final String table;
  private final String insertSql;
  private final String insertPipelinedSql;
  private final String insertManySql;
  private final String insertManyPipelinedSql;
  private final @Nullable RotatingLayout layout;
  private final ReplicationCheck replicationCheck;

  private PostgresInbox(ConnectionFactory connectionFactory, String table, @Nullable RotatingLayout layout) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
    this.table = Identifiers.requireRoomForDerivedNames("table", Identifiers.requireSqlIdentifier("table", table),
        derivedSuffixes(layout));
    this.layout = layout;
    this.replicationCheck = new ReplicationCheck(connectionFactory, table);
    // The consumer is NULL, which the NOT NULL column refuses, unless a pipelined BEGIN started the transaction.
    String guardedConsumer = "CASE WHEN current_setting('" + IN_TRANSACTION_SETTING + "', true) = 'on' THEN $1 END";
    if (layout == null) {
      this.insertSql = "INSERT INTO " + table + " (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";
      this.insertPipelinedSql = "INSERT INTO " + table + " (consumer, message_id) VALUES (" + guardedConsumer
          + ", $2) ON CONFLICT DO NOTHING";
      this.insertManySql = "INSERT INTO " + table
          + " (consumer, message_id) SELECT $1, id FROM unnest($2::text[]) AS ids(id) ORDER BY id"
          + " ON CONFLICT DO NOTHING RETURNING message_id";
      this.insertManyPipelinedSql = "INSERT INTO " + table + " (consumer, message_id) SELECT " + guardedConsumer
          + ", id FROM unnest($2::text[]) AS ids(id) ORDER BY id ON CONFLICT DO NOTHING RETURNING message_id";
    } else {
      this.insertSql = "SELECT id FROM " + table + "_record($1, ARRAY[$2]::text[]) AS id";
      this.insertPipelinedSql = "SELECT id FROM " + table + "_record(" + guardedConsumer + ", ARRAY[$2]::text[]) AS id";
      this.insertManySql = "SELECT id FROM " + table + "_record($1, $2::text[]) AS id";
      this.insertManyPipelinedSql = "SELECT id FROM " + table + "_record(" + guardedConsumer + ", $2::text[]) AS id";
    }
  }

  /** What the schema appends to the unqualified table name: index, function, partition and layout names. */
  private static List<String> derivedSuffixes(@Nullable RotatingLayout layout) {
    if (layout == null) {
      return Templates.PLAIN_SUFFIXES;
    }
    List<String> suffixes = new java.util.ArrayList<>(Templates.ROTATING_SUFFIXES);
    suffixes.add("_p" + (layout.slots() - 1));
    return suffixes;
  }

  /** The shipped migrations' derived-name suffixes, read once, on first use. */
  private static final class Templates {
    static final List<String> PLAIN_SUFFIXES = List.copyOf(SqlScripts.derivedSuffixes(readMigration(), DEFAULT_TABLE));
    static final List<String> ROTATING_SUFFIXES = List
        .copyOf(SqlScripts.derivedSuffixes(SqlScripts.read(ROTATING_MIGRATION_RESOURCE),
            ROTATING_TEMPLATE_TABLE));
  }

  /**
   * An inbox on the default table.
   *
   * @param connectionFactory a PostgreSQL connection factory, ideally an r2dbc-pool
   *     {@code ConnectionPool} (see {@link PostgresConnections#pool})
   * @return the inbox
   */
  public static PostgresInbox create(ConnectionFactory connectionFactory) {
    return new PostgresInbox(connectionFactory, DEFAULT_TABLE, null);
  }

  /**
   * An inbox on another table.
   *
   * @param connectionFactory a PostgreSQL connection factory
   * @param table a plain SQL identifier, optionally schema-qualified, of at most
   *     {@value #MAX_TABLE_NAME_LENGTH} characters without the schema
   * @return the inbox
   * @throws IllegalArgumentException when {@code table} is not a plain identifier, or so long that
   *     its index name would exceed PostgreSQL's 63-byte identifier limit
   */
  public static PostgresInbox create(ConnectionFactory connectionFactory, String table) {
    return new PostgresInbox(connectionFactory, table, null);
  }

  /**
   * An inbox with the {@link RotatingLayout} for high volumes: old ids leave in O(1) by
   * {@code TRUNCATE} of whole slot partitions (run by {@code dev.idem.retention.Retention}), and
   * every id stays unique inside the window. See {@link RotatingLayout} for the exact guarantee
   * and the costs. The schema ships as {@value #ROTATING_MIGRATION_RESOURCE}.
   *
   * @param connectionFactory a PostgreSQL connection factory
   * @param table a plain SQL identifier, optionally schema-qualified, of at most
   *     {@value #MAX_ROTATING_TABLE_NAME_LENGTH} characters without the schema; slot partitions are
   *     named {@code <table>_p0}, {@code <table>_p1}, ...
   * @param window how long ids are kept at least
   * @param periods how many periods the window spans (slots are {@code periods + 2})
   * @return the inbox
   * @throws IllegalArgumentException when {@code table} is not a plain identifier, or so long that
   *     a name derived from it would exceed PostgreSQL's 63-byte identifier limit
   */
  public static PostgresInbox rotating(ConnectionFactory connectionFactory, String table, Duration window, int periods) {
    return new PostgresInbox(connectionFactory, table, new RotatingLayout(window, periods));
  }

  /**
   * The rotating layout, when this inbox has one.
   *
   * @return the layout, or {@code null} for the plain table
   */
  public @Nullable RotatingLayout rotatingLayout() {
    return layout;
  }

  /**
   * The partition of a slot of the rotating layout.
   *
   * @param slot from 0 to {@code slots - 1}
   * @return the partition's table name
   */
  public String slotPartition(int slot) {
    if (layout == null || slot < 0 || slot >= layout.slots()) {
      throw new IllegalArgumentException("no slot " + slot + " in " + this);
    }
    return table + "_p" + slot;
  }

  /**
   * The connection factory that transactions use by default.
   *
   * @return the factory
   */
  public ConnectionFactory connectionFactory() {
    return connectionFactory;
  }

  /**
   * The table name.
   *
   * @return the validated table name
   */
  public String table() {
    return table;
  }

  /**
   * Records that {@code consumer} processes {@code messageId}, inside the caller's transaction.
   *
   * @param connection a connection in a transaction
   * @param consumer the consumer name
   * @param messageId the message id
   * @return {@code true} when the row was inserted (first time), {@code false} for a duplicate
   */
  public Mono<Boolean> record(Connection connection, String consumer, String messageId) {
    return record(insertSql, connection, consumer, messageId);
  }

  /**
   * Like {@link #record}, for a statement sent right behind a pipelined {@code BEGIN}, before
   * BEGIN's answer arrived (the pipeline's default transaction runner does that to save a round
   * trip): it records the id only inside a transaction whose BEGIN set
   * {@value #IN_TRANSACTION_SETTING} to {@code on} ({@code SET LOCAL}), and fails (a NOT NULL
   * violation, nothing written) anywhere else, so that a BEGIN that did not run cannot leave the
   * id committed on its own.
   *
   * @param connection a connection whose pipelined BEGIN was sent just before
   * @param consumer the consumer name
   * @param messageId the message id
   * @return {@code true} when the row was inserted (first time), {@code false} for a duplicate
   */
  public Mono<Boolean> recordPipelined(Connection connection, String consumer, String messageId) {
    return record(insertPipelinedSql, connection, consumer, messageId);
  }

  private Mono<Boolean> record(String sql, Connection connection, String consumer, String messageId) {
    if (layout != null) {
      return Flux.from(connection.createStatement(sql).bind(0, consumer).bind(1, messageId).execute())
          .concatMap(result -> result.map(row -> row.get(0, String.class)))
          .hasElements();
    }
    return Flux.from(connection.createStatement(sql).bind(0, consumer).bind(1, messageId).execute())
        .concatMap(result -> Mono.from(result.getRowsUpdated()))
        .reduce(0L, Long::sum)
        .map(rows -> rows > 0);
  }

  /**
   * Records several ids in one statement (one round trip), inside the caller's transaction.
   * Ids are inserted in sorted order, so that two transactions with overlapping ids take their
   * row locks in the same order and cannot deadlock on them.
   *
   * @param connection a connection in a transaction
   * @param consumer the consumer name
   * @param messageIds the ids; repeats are allowed (only one of them can be new)
   * @return the ids whose rows were inserted (seen for the first time)
   */
  public Mono<java.util.Set<String>> recordAll(Connection connection, String consumer, java.util.Collection<String> messageIds) {
    return recordAll(insertManySql, connection, consumer, messageIds);
  }

  /**
   * Like {@link #recordAll}, for a statement sent right behind a pipelined {@code BEGIN}: it
   * records only inside a transaction whose BEGIN set {@value #IN_TRANSACTION_SETTING} to
   * {@code on}, and fails anywhere else, as {@link #recordPipelined} does.
   *
   * @param connection a connection whose pipelined BEGIN was sent just before
   * @param consumer the consumer name
   * @param messageIds the ids; repeats are allowed (only one of them can be new)
   * @return the ids whose rows were inserted (seen for the first time)
   */
  public Mono<java.util.Set<String>> recordAllPipelined(Connection connection, String consumer,
      java.util.Collection<String> messageIds) {
    return recordAll(insertManyPipelinedSql, connection, consumer, messageIds);
  }

  private Mono<java.util.Set<String>> recordAll(String sql, Connection connection, String consumer,
      java.util.Collection<String> messageIds) {
    String[] ids = messageIds.toArray(String[]::new);
    return Flux.from(connection.createStatement(sql).bind(0, consumer).bind(1, ids).execute())
        .concatMap(result -> result.map(row -> row.get(0, String.class)))
        .collect(java.util.stream.Collectors.toCollection(java.util.HashSet::new));
  }

  /**
   * Creates the table and its index when they do not exist. Safe to call concurrently and
   * repeatedly. When the plain layout's table and index exist already, it only looks them up and
   * runs no DDL: a {@code CREATE INDEX IF NOT EXISTS} takes a SHARE lock on the table before it
   * finds the index there, so it would wait for every open transaction that writes the table (the
   * consumers already running) and, while it waits, hold back their next inserts.
   *
   * @return completes when the schema exists
   */
  public Mono<Void> createSchemaIfAbsent() {
    List<String> statements = schemaStatements();
    return Mono.usingWhen(connectionFactory.create(),
        connection -> plainSchemaExists(connection)
            .flatMap(exists -> exists
                ? Mono.<Void>empty()
                : Flux.fromIterable(statements)
                    .concatMap(sql -> Flux.from(connection.createStatement(sql).execute()).concatMap(r -> r.getRowsUpdated()))
                    .then())
            .then(layout == null ? Mono.empty() : checkLayout(connection)),
        Connection::close)
        // Two sessions racing on CREATE ... IF NOT EXISTS can still collide in the catalog.
        .retry(2);
  }

  /**
   * Deletes rows older than {@code retention} in batches of {@value #PURGE_BATCH_SIZE}, each its
   * own short transaction, so the live workload is never blocked for long. The retention must
   * exceed the broker's redelivery horizon: an id purged too early can be applied again.
   *
   * @param retention how long processed ids are kept
   * @return the number of rows deleted
   */
  public Mono<Long> purgeOlderThan(Duration retention) {
    Objects.requireNonNull(retention, "retention");
    if (layout != null) {
      throw new UnsupportedOperationException(
          "the rotating inbox " + table + " is emptied slot by slot by dev.idem.retention.Retention");
    }
    if (retention.isNegative() || retention.isZero()) {
      throw new IllegalArgumentException("retention must be positive, was " + retention);
    }
    String sql = "DELETE FROM " + table + " WHERE ctid IN (SELECT ctid FROM " + table
        + " WHERE processed_at < now() - make_interval(secs => $1) LIMIT " + PURGE_BATCH_SIZE + ")";
    double seconds = retention.toMillis() / 1000.0;
    Mono<Long> batch = Mono.usingWhen(connectionFactory.create(),
        connection -> Flux.from(connection.createStatement(sql).bind(0, seconds).execute())
            .concatMap(r -> Mono.from(r.getRowsUpdated())).reduce(0L, Long::sum),
        Connection::close);
    return batch.expand(deleted -> deleted >= PURGE_BATCH_SIZE ? batch : Mono.empty())
        .reduce(0L, Long::sum);
  }

  /**
   * The migration's statements for this table, built from the migration as a template: the
   * default table name and index name are whole words of it, replaced in one pass, so a
   * schema-qualified table ({@code billing.processed_messages}) gets an unqualified index name
   * ({@code processed_messages_processed_at_idx}, which PostgreSQL puts in the table's schema).
   */
  List<String> schemaStatements() {
    if (layout != null) {
      List<String> rotating = new java.util.ArrayList<>(SqlScripts.statements(
          SqlScripts.rename(SqlScripts.read(ROTATING_MIGRATION_RESOURCE), ROTATING_TEMPLATE_TABLE, table, true)));
      // The layout row goes in before the last statement, the block that creates the slot partitions.
      rotating.add(rotating.size() - 1, "INSERT INTO " + table + "_layout (period_ms, slots) VALUES ("
          + layout.period().toMillis() + ", " + layout.slots() + ") ON CONFLICT DO NOTHING");
      return rotating;
    }
    String unqualified = table.contains(".") ? table.substring(table.indexOf('.') + 1) : table;
    Matcher names = TEMPLATE_NAMES.matcher(readMigration());
    StringBuilder script = new StringBuilder();
    while (names.find()) {
      String replacement = names.group().equals(DEFAULT_TABLE) ? table : unqualified + "_processed_at_idx";
      names.appendReplacement(script, Matcher.quoteReplacement(replacement));
    }
    names.appendTail(script);
    String withoutComments = script.toString().lines().filter(line -> !line.trim().startsWith("--"))
        .collect(Collectors.joining("\n"));
    return Arrays.stream(withoutComments.split(";")).map(String::trim).filter(s -> !s.isEmpty()).toList();
  }

  /** Whether the plain layout's table and its index exist (always {@code false} for the rotating layout, which checks itself). */
  private Mono<Boolean> plainSchemaExists(Connection connection) {
    if (layout != null) {
      return Mono.just(false);
    }
    // An index lives in its table's schema: s.t's index is s.t_processed_at_idx.
    String index = table + "_processed_at_idx";
    return Flux.from(connection.createStatement("SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL")
        .bind(0, table).bind(1, index).execute())
        .concatMap(result -> result.map(row -> Boolean.TRUE.equals(row.get(0, Boolean.class))))
        .next()
        .defaultIfEmpty(false);
  }

  /**
   * Checks, without DDL, that the layout row of a rotating inbox's database table is the one this
   * inbox is configured with: the check {@link #createSchemaIfAbsent()} makes, for a schema that a
   * migration tool created. {@code Retention} runs it at start and before every cleanup, since it
   * picks the slots to empty from the configured period and slot count, while the database records
   * ids by its own row: with the two apart, it would empty slots that hold live ids.
   *
   * @return completes at once for the plain table, and when the row matches; fails with an
   *     {@link IllegalStateException} naming both layouts when it differs, or when the row is missing
   */
  public Mono<Void> verifyLayout() {
    return layout == null ? Mono.empty() : Mono.usingWhen(connectionFactory.create(), this::checkLayout, Connection::close);
  }

  /**
   * Checks that an acknowledged message's effect survives a failover of this inbox's database:
   * when the server the connection factory reaches is a primary with standbys
   * ({@code pg_stat_replication}) and none of them is synchronous ({@code sync_state} is neither
   * {@code sync} nor {@code quorum}), logs one WARN, the first time only, that says so. With an
   * asynchronous standby, the last commits before a crash of the primary can be missing on the
   * standby it fails over to, after Idem acknowledged their messages. Every consumer runs it when
   * it starts processing; it costs one query and delays nothing.
   *
   * <p>A role without {@code pg_read_all_stats} sees no {@code sync_state}: then nothing is logged
   * above DEBUG. A server without standbys, or a standby, is not warned about.
   *
   * @return emits {@code true} when replication is asynchronous; never errors (a failed check
   *     logs at DEBUG and emits {@code false})
   */
  public Mono<Boolean> checkReplication() {
    return replicationCheck.run();
  }

  /** The database's layout row must be the configured one: a changed period or slot count would mix slots. */
  private Mono<Void> checkLayout(Connection connection) {
    RotatingLayout layout = Objects.requireNonNull(this.layout); // called only for a rotating inbox
    return Flux.from(connection.createStatement("SELECT period_ms, slots FROM " + table + "_layout").execute())
        .concatMap(result -> result.map(row -> new long[]{row.get(0, Long.class), row.get(1, Integer.class)}))
        .next()
        .switchIfEmpty(Mono.error(() -> new IllegalStateException("the rotating inbox " + table + " has no layout row in " + table
            + "_layout: insert (period_ms, slots) = (" + layout.period().toMillis() + ", " + layout.slots()
            + ") before the block that"
            + " creates the slot partitions, as the migration's header says (window " + layout.window() + ", periods "
            + layout.periods() + ")")))
        .flatMap(found -> found[0] == layout.period().toMillis() && found[1] == layout.slots()
            ? Mono.<Void>empty()
            : Mono
                .<Void>error(new IllegalStateException("the rotating inbox " + table + " was created with a period of " + found[0]
                    + " ms and " + found[1] + " slots, but is configured with " + layout.period().toMillis() + " ms and "
                    + layout.slots()
                    + " slots (window " + layout.window() + ", periods " + layout.periods()
                    + "); use the original settings or a new table")));
  }

  private static String readMigration() {
    try (InputStream in = PostgresInbox.class.getResourceAsStream(MIGRATION_RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException("Missing " + MIGRATION_RESOURCE + " on the classpath");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public String toString() {
    return "PostgresInbox[table=" + table + (layout == null ? "" : ", " + layout) + "]";
  }
}
