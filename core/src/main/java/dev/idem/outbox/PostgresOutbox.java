package dev.idem.outbox;

import dev.idem.internal.Identifiers;
import dev.idem.internal.SqlScripts;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The outbox table ({@value #DEFAULT_TABLE} by default) over R2DBC PostgreSQL: messages written
 * in the same transaction as the dedup row and the business change, sent later by an
 * {@link OutboxRelay}.
 *
 * <p>Guarantees: {@link #add} writes on the caller's connection inside the caller's transaction,
 * so the row commits with the business change or not at all (a duplicate delivery, whose
 * handler does not run, writes none; a rolled-back transaction leaves none). Each row gets a
 * stable message id (a random UUID unless the record names one) that the relay sends with every
 * attempt. By default {@link #add} also calls {@code pg_notify} on the channel {@link #channel()},
 * which PostgreSQL delivers at commit, so that a listening relay wakes at once; see
 * {@link #withoutNotify()} for its cost. The table name is validated as a plain (optionally
 * schema-qualified) SQL identifier of at most {@value #MAX_TABLE_NAME_LENGTH} characters without
 * the schema, so that its index names ({@code <table>_pending_idx}, {@code <table>_sent_at_idx},
 * ...) fit PostgreSQL's 63-byte identifier limit; a longer name is refused when the outbox is
 * built, naming the derived name and the limit, rather than truncated by PostgreSQL when the
 * schema is created.
 *
 * <p>Rows move from {@code PENDING} to {@code SENT} when the destination confirmed them, or to
 * {@code PARKED} after the relay's attempt limit; parked rows are kept and listed by
 * {@link #parked}, and {@link #resend(String)} or {@link #resendParked()} put them back.
 *
 * <p>Immutable and thread-safe. The schema ships as {@value #MIGRATION_RESOURCE} for Flyway or
 * Liquibase; {@link #createSchemaIfAbsent()} runs it for quick starts.
 */
public final class PostgresOutbox {

  /** The default table name: {@value}. */
  public static final String DEFAULT_TABLE = "idem_outbox";
  /** The migration on the classpath. */
  public static final String MIGRATION_RESOURCE = "/db/idem/V2__idem_outbox.sql";

  /**
   * The longest table name (without its schema): {@value}, so that the longest index name,
   * {@code <table>_pending_idx} or {@code <table>_sent_at_idx}, fits PostgreSQL's 63-byte
   * identifier limit.
   */
  public static final int MAX_TABLE_NAME_LENGTH = 51;

  static final String COLUMNS = "o.seq, o.message_id, o.destination, o.message_key, o.payload, "
      + "ARRAY(SELECT unnest(ARRAY[h.key, h.value]) FROM jsonb_each_text(o.headers) AS h) AS headers, o.attempts, o.created_at";

  private final ConnectionFactory connectionFactory;
  private final String table;
  private final String channel;
  private final boolean notifyOnAdd;
  private final String insertSql;

  private PostgresOutbox(ConnectionFactory connectionFactory, String table, boolean notifyOnAdd) {
    this.connectionFactory = Objects.requireNonNull(connectionFactory, "connectionFactory");
    this.table = Identifiers.requireRoomForDerivedNames("table", Identifiers.requireSqlIdentifier("table", table),
        DerivedNames.SUFFIXES);
    this.channel = SqlScripts.unqualified(table);
    this.notifyOnAdd = notifyOnAdd;
    String insert = "INSERT INTO " + table + " (message_id, destination, message_key, payload, headers)"
        + " VALUES ($1, $2, $3, $4, jsonb_object($5::text[], $6::text[]))";
    this.insertSql = notifyOnAdd
        ? "WITH added AS (" + insert + " RETURNING seq) SELECT pg_notify('" + channel + "', '') FROM added"
        : insert;
  }

  /** The shipped migration's index-name suffixes, read once, on first use. */
  private static final class DerivedNames {
    static final List<String> SUFFIXES = List
        .copyOf(SqlScripts.derivedSuffixes(SqlScripts.read(MIGRATION_RESOURCE), DEFAULT_TABLE));
  }

  /**
   * An outbox on the default table.
   *
   * @param connectionFactory a PostgreSQL connection factory, ideally a pool
   * @return the outbox
   */
  public static PostgresOutbox create(ConnectionFactory connectionFactory) {
    return new PostgresOutbox(connectionFactory, DEFAULT_TABLE, true);
  }

  /**
   * An outbox on another table.
   *
   * @param connectionFactory a PostgreSQL connection factory
   * @param table a plain SQL identifier, optionally schema-qualified, of at most
   *     {@value #MAX_TABLE_NAME_LENGTH} characters without the schema
   * @return the outbox
   * @throws IllegalArgumentException when {@code table} is not a plain identifier, or so long that
   *     an index name derived from it would exceed PostgreSQL's 63-byte identifier limit
   */
  public static PostgresOutbox create(ConnectionFactory connectionFactory, String table) {
    return new PostgresOutbox(connectionFactory, table, true);
  }

  /**
   * The same outbox without {@code pg_notify} on {@link #add}. PostgreSQL serialises the commits
   * of transactions that sent a notification (a global lock on its notification queue), which
   * can matter at thousands of commits per second; without it a relay finds new rows by polling
   * only, so latency is up to its poll interval.
   *
   * @return a copy that does not notify
   */
  public PostgresOutbox withoutNotify() {
    return new PostgresOutbox(connectionFactory, table, false);
  }

  /**
   * The connection factory the relay and the maintenance methods use.
   *
   * @return the factory
   */
  public ConnectionFactory connectionFactory() {
    return connectionFactory;
  }

  /**
   * The table name.
   *
   * @return the validated name
   */
  public String table() {
    return table;
  }

  /**
   * The notification channel: the unqualified table name.
   *
   * @return the channel
   */
  public String channel() {
    return channel;
  }

  /**
   * Whether {@link #add} notifies the channel.
   *
   * @return {@code true} unless {@link #withoutNotify()}
   */
  public boolean notifies() {
    return notifyOnAdd;
  }

  /**
   * Writes a row inside the caller's transaction. In a handler, {@code tx.outbox(outbox, record)}
   * calls this with the message's connection.
   *
   * @param connection a connection in a transaction
   * @param record the message
   * @return the row's message id, after the row was written (not yet committed)
   */
  public Mono<String> add(Connection connection, OutboxRecord record) {
    Objects.requireNonNull(connection, "connection");
    Objects.requireNonNull(record, "record");
    return Mono.defer(() -> {
      String id = record.id() != null ? record.id() : UUID.randomUUID().toString();
      String[] names = record.headers().keySet().toArray(String[]::new);
      String[] values = record.headers().values().toArray(String[]::new);
      Statement statement = connection.createStatement(insertSql)
          .bind(0, id)
          .bind(1, record.destination())
          .bind(3, record.payload())
          .bind(4, names)
          .bind(5, values);
      if (record.key() == null) {
        statement.bindNull(2, String.class);
      } else {
        statement.bind(2, record.key());
      }
      return Flux.from(statement.execute()).concatMap(result -> result.getRowsUpdated()).then(Mono.just(id));
    });
  }

  /**
   * Creates the table and its indexes when they do not exist. Safe to call concurrently and
   * repeatedly.
   *
   * @return completes when the schema exists
   */
  public Mono<Void> createSchemaIfAbsent() {
    List<String> statements = schemaStatements();
    return Mono.usingWhen(connectionFactory.create(),
        connection -> Flux.fromIterable(statements)
            .concatMap(sql -> Flux.from(connection.createStatement(sql).execute()).concatMap(r -> r.getRowsUpdated()))
            .then(),
        Connection::close)
        // Two sessions racing on CREATE ... IF NOT EXISTS can still collide in the catalog.
        .retry(2);
  }

  /** The migration's statements for this table. */
  List<String> schemaStatements() {
    return SqlScripts.statements(SqlScripts.rename(SqlScripts.read(MIGRATION_RESOURCE), DEFAULT_TABLE, table));
  }

  /**
   * Parked rows, oldest first: what an operator looks at before re-sending.
   *
   * @param limit at most this many rows
   * @return the parked rows
   */
  public Flux<ParkedMessage> parked(int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be at least 1, was " + limit);
    }
    String sql = "SELECT seq, message_id, destination, message_key, attempts, last_error, created_at, parked_at FROM " + table
        + " WHERE status = 'PARKED' ORDER BY seq LIMIT " + limit;
    return withConnection(c -> Flux.from(c.createStatement(sql).execute())
        .concatMap(result -> result.map((row, meta) -> new ParkedMessage(
            row.get("seq", Long.class), row.get("message_id", String.class), row.get("destination", String.class),
            row.get("message_key", String.class), row.get("attempts", Integer.class), row.get("last_error", String.class),
            row.get("created_at", Instant.class), row.get("parked_at", Instant.class)))));
  }

  /**
   * Puts the parked rows with this message id back in line: pending, attempts reset, due now.
   * The relay sends them again with the same id.
   *
   * @param messageId the message id
   * @return the number of rows put back
   */
  public Mono<Long> resend(String messageId) {
    Objects.requireNonNull(messageId, "messageId");
    return update("UPDATE " + table + " SET status = 'PENDING', attempts = 0, next_attempt_at = now(), parked_at = NULL"
        + " WHERE status = 'PARKED' AND message_id = $1", messageId);
  }

  /**
   * Puts every parked row back in line (after the destination was fixed).
   *
   * @return the number of rows put back
   */
  public Mono<Long> resendParked() {
    return update("UPDATE " + table + " SET status = 'PENDING', attempts = 0, next_attempt_at = now(), parked_at = NULL"
        + " WHERE status = 'PARKED'");
  }

  /**
   * Counts what waits: pending rows, the age of the oldest one, parked rows. Each count reads
   * a partial index, so it costs time in proportion to the backlog, not the table.
   *
   * @return the figures
   */
  public Mono<OutboxStats> stats() {
    String sql = "SELECT (SELECT count(*) FROM " + table + " WHERE status = 'PENDING') AS pending,"
        + " (SELECT extract(epoch FROM clock_timestamp() - created_at) FROM " + table
        + " WHERE status = 'PENDING' ORDER BY seq LIMIT 1)::float8 AS oldest,"
        + " (SELECT count(*) FROM " + table + " WHERE status = 'PARKED') AS parked";
    return withConnection(c -> Flux.from(c.createStatement(sql).execute())
        .concatMap(result -> result.map((row, meta) -> {
          Double oldest = row.get("oldest", Double.class);
          return new OutboxStats(row.get("pending", Long.class),
              oldest == null ? Duration.ZERO : Duration.ofMillis(Math.max(0, (long) (oldest * 1000))),
              row.get("parked", Long.class));
        }))).next();
  }

  /** Reads a claimed row (columns {@link #COLUMNS}) as the message its next attempt sends. */
  static OutboxMessage message(Readable row) {
    String[] flat = row.get("headers", String[].class);
    Map<String, String> headers = new LinkedHashMap<>();
    for (int i = 0; flat != null && i + 1 < flat.length; i += 2) {
      headers.put(flat[i], flat[i + 1]);
    }
    Integer attempts = row.get("attempts", Integer.class);
    return new OutboxMessage(row.get("seq", Long.class), row.get("message_id", String.class),
        row.get("destination", String.class),
        row.get("message_key", String.class), row.get("payload", byte[].class), headers,
        (attempts == null ? 0 : attempts) + 1, row.get("created_at", Instant.class));
  }

  private Mono<Long> update(String sql, Object... args) {
    return withConnection(c -> {
      Statement statement = c.createStatement(sql);
      for (int i = 0; i < args.length; i++) {
        statement.bind(i, args[i]);
      }
      return Flux.from(statement.execute()).concatMap(r -> Mono.from(r.getRowsUpdated()));
    }).reduce(0L, Long::sum);
  }

  private <R> Flux<R> withConnection(Function<Connection, Flux<R>> work) {
    return Flux.usingWhen(connectionFactory.create(), work, Connection::close);
  }

  @Override
  public String toString() {
    return "PostgresOutbox[table=" + table + ", notify=" + notifyOnAdd + "]";
  }
}
