package dev.idem.bench;

import dev.idem.postgres.PostgresInbox;
import io.r2dbc.spi.ConnectionFactories;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

/**
 * The PostgreSQL side: URLs for R2DBC (Idem) and JDBC (the blocking peers), the accounts table and
 * the dedup table, and what the checks read back.
 */
final class Database {

  private final String r2dbcUrl;
  private final String jdbcUrl;
  private final Properties credentials = new Properties();

  /**
   * @param uri {@code postgresql://user[:password]@host:port/database}
   */
  Database(String uri) {
    URI parsed = URI.create(uri);
    if (!"postgresql".equals(parsed.getScheme()) || parsed.getHost() == null || parsed.getPath() == null
        || parsed.getPath().length() < 2) {
      throw new IllegalArgumentException(
          "-Dpostgres must look like postgresql://user[:password]@host:port/database, was " + Options.masked(uri));
    }
    String user = "postgres";
    if (parsed.getRawUserInfo() != null) {
      String[] info = parsed.getUserInfo().split(":", 2);
      user = info[0];
      if (info.length > 1) {
        credentials.setProperty("password", info[1]);
      }
    }
    credentials.setProperty("user", user);
    int port = parsed.getPort() < 0 ? 5432 : parsed.getPort();
    this.jdbcUrl = "jdbc:postgresql://" + parsed.getHost() + ":" + port + parsed.getPath();
    this.r2dbcUrl = "r2dbc:" + uri;
  }

  String r2dbcUrl() {
    return r2dbcUrl;
  }

  /** A new JDBC connection; the caller closes it. */
  Connection connect() throws SQLException {
    return DriverManager.getConnection(jdbcUrl, credentials);
  }

  String serverVersion() throws SQLException {
    try (Connection c = connect(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW server_version")) {
      rs.next();
      return rs.getString(1);
    }
  }

  void execute(String... statements) throws SQLException {
    try (Connection c = connect(); Statement s = c.createStatement()) {
      for (String sql : statements) {
        s.execute(sql);
      }
    }
  }

  /**
   * Fresh tables for a row: the accounts at balance 0 and an empty dedup table with Idem's own
   * schema (created by {@link PostgresInbox#createSchemaIfAbsent()}); then a checkpoint, so that
   * no row pays for the previous row's dirty pages.
   */
  void reset(Tables tables, int accounts) throws SQLException {
    execute("DROP TABLE IF EXISTS " + tables.accounts() + ", " + tables.inbox(),
        "CREATE TABLE " + tables.accounts() + " (id int PRIMARY KEY, balance bigint NOT NULL)",
        "INSERT INTO " + tables.accounts() + " SELECT g, 0 FROM generate_series(1, " + accounts + ") g",
        "ANALYZE " + tables.accounts());
    PostgresInbox.create(ConnectionFactories.get(r2dbcUrl), tables.inbox()).createSchemaIfAbsent().block();
    try {
      execute("CHECKPOINT");
    } catch (SQLException e) {
      // CHECKPOINT needs a superuser (or pg_checkpoint); without it rows are a little noisier.
    }
  }

  void drop(Tables tables) {
    try {
      execute("DROP TABLE IF EXISTS " + tables.accounts() + ", " + tables.inbox());
    } catch (SQLException e) {
      System.err.println("could not drop the benchmark's tables " + tables + ": " + e);
    }
  }

  Map<Integer, Long> balances(Tables tables) throws SQLException {
    Map<Integer, Long> balances = new HashMap<>();
    try (Connection c = connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT id, balance FROM " + tables.accounts())) {
      while (rs.next()) {
        balances.put(rs.getInt(1), rs.getLong(2));
      }
    }
    return balances;
  }

  long dedupRows(Tables tables) throws SQLException {
    try (Connection c = connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM " + tables.inbox())) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /**
   * The two tables of a run; names unique to the run, so that runs and other suites sharing the
   * database do not collide.
   *
   * @param accounts the accounts table
   * @param inbox the dedup table
   */
  record Tables(String accounts, String inbox) {
    static Tables unique() {
      String suffix = Long.toString(ProcessHandle.current().pid()) + "_" + Long.toString(System.nanoTime() & 0xffffffL, 36);
      return new Tables("bench_accounts_" + suffix, "bench_inbox_" + suffix);
    }
  }
}
