package dev.idem.testing;

import dev.idem.postgres.PostgresConnections;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Hands tests a real PostgreSQL, found in this order:
 * <ol>
 *   <li>the environment variable {@value #URL_ENV} (an R2DBC URL such as
 *       {@code r2dbc:postgresql://postgres@db.example:5432/test});</li>
 *   <li>a server listening on 127.0.0.1:5432 (user {@code postgres}, trust auth, database
 *       {@code test});</li>
 *   <li>a Testcontainers {@code postgres:16-alpine} container when a Docker engine is reachable.</li>
 * </ol>
 * When none is available, {@link #get()} throws an {@link IllegalStateException} that says how
 * to provide one: tests fail, they never skip.
 */
public final class PostgresService {

  /** Environment variable naming an R2DBC URL of a PostgreSQL server for tests. */
  public static final String URL_ENV = "IDEM_TEST_POSTGRES_URL";
  /** The local server tried when the environment variable is unset. */
  public static final String LOCAL_URL = "r2dbc:postgresql://postgres@127.0.0.1:5432/test";

  private static final AtomicInteger SEQUENCE = new AtomicInteger();
  private static volatile PostgresService instance;

  private final String url;
  private final String host;
  private final int port;

  private PostgresService(String url) {
    this.url = url;
    var options = io.r2dbc.spi.ConnectionFactoryOptions.parse(url);
    this.host = (String) options.getRequiredValue(io.r2dbc.spi.ConnectionFactoryOptions.HOST);
    Object p = options.getValue(io.r2dbc.spi.ConnectionFactoryOptions.PORT);
    this.port = p == null ? 5432 : Integer.parseInt(p.toString());
  }

  /**
   * The shared service, located on first use.
   *
   * @return the service
   * @throws IllegalStateException with instructions when no PostgreSQL can be found
   */
  public static PostgresService get() {
    PostgresService s = instance;
    if (s == null) {
      synchronized (PostgresService.class) {
        if (instance == null) {
          instance = new PostgresService(locate());
        }
        s = instance;
      }
    }
    return s;
  }

  private static String locate() {
    String fromEnv = System.getenv(URL_ENV);
    if (fromEnv != null && !fromEnv.isBlank()) {
      return fromEnv;
    }
    if (Ports.listening("127.0.0.1", 5432)) {
      return LOCAL_URL;
    }
    String docker = TestcontainersPostgres.tryStart();
    if (docker != null) {
      return docker;
    }
    throw new IllegalStateException("No PostgreSQL for the tests. Provide one of: (1) the environment variable "
        + URL_ENV + " with an R2DBC URL, e.g. r2dbc:postgresql://postgres:secret@host:5432/test; "
        + "(2) a server on 127.0.0.1:5432 with trust auth and a database 'test' "
        + "(on Debian: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start); "
        + "(3) a Docker engine for Testcontainers.");
  }

  /**
   * The R2DBC URL of the server.
   *
   * @return the URL
   */
  public String url() {
    return url;
  }

  /**
   * The server's host.
   *
   * @return the host
   */
  public String host() {
    return host;
  }

  /**
   * The server's port.
   *
   * @return the port
   */
  public int port() {
    return port;
  }

  /**
   * The same URL pointed at another host and port (for example a {@link TcpProxy}).
   *
   * @param otherHost the host
   * @param otherPort the port
   * @return the URL
   */
  public String urlVia(String otherHost, int otherPort) {
    return url.replaceFirst("@[^/]+/", "@" + otherHost + ":" + otherPort + "/");
  }

  /**
   * A new pool; the caller disposes it.
   *
   * @param maxSize the pool size
   * @return the pool
   */
  public ConnectionPool pool(int maxSize) {
    return PostgresConnections.pool(url, maxSize);
  }

  /**
   * An unpooled factory.
   *
   * @return the factory
   */
  public ConnectionFactory connectionFactory() {
    return ConnectionFactories.get(url);
  }

  /**
   * A name no other test uses, for tables and consumers.
   *
   * @param prefix a readable prefix (letters, digits, underscore)
   * @return the unique name
   */
  public static String uniqueName(String prefix) {
    return prefix + "_" + ProcessHandle.current().pid() + "_" + System.nanoTime() % 1_000_000_000L + "_"
        + SEQUENCE.incrementAndGet();
  }

  /**
   * Runs SQL statements outside any pipeline (setup and assertions), blocking.
   *
   * @param sql the statements, run in order
   */
  public void execute(String... sql) {
    withConnection(c -> Flux.fromArray(sql)
        .concatMap(s -> Flux.from(c.createStatement(s).execute()).concatMap(r -> r.getRowsUpdated())).then())
        .block(Duration.ofSeconds(30));
  }

  /**
   * Runs a query and returns its rows as maps of column name to value, blocking.
   *
   * @param sql the query
   * @param args positional arguments for $1, $2, ...
   * @return the rows
   */
  public List<Map<String, Object>> query(String sql, Object... args) {
    return withConnection(c -> {
      var statement = c.createStatement(sql);
      for (int i = 0; i < args.length; i++) {
        statement.bind(i, args[i]);
      }
      return Flux.from(statement.execute())
          .concatMap(result -> result.map((row, meta) -> {
            Map<String, Object> values = new java.util.LinkedHashMap<>();
            for (var column : meta.getColumnMetadatas()) {
              values.put(column.getName(), row.get(column.getName()));
            }
            return values;
          }))
          .collectList();
    }).block(Duration.ofSeconds(30));
  }

  /**
   * The single number a query returns, blocking.
   *
   * @param sql a query returning one row with one numeric column
   * @param args positional arguments
   * @return the number
   */
  public long count(String sql, Object... args) {
    List<Map<String, Object>> rows = query(sql, args);
    return ((Number) rows.get(0).values().iterator().next()).longValue();
  }

  private <R> Mono<R> withConnection(java.util.function.Function<Connection, Publisher<R>> work) {
    return Mono.usingWhen(connectionFactory().create(), c -> Mono.from(work.apply(c)), Connection::close);
  }

  /**
   * Lists the rows of a table's column in the order of another column.
   *
   * @param sql a query with one column
   * @param args positional arguments
   * @return the values
   */
  public List<Object> column(String sql, Object... args) {
    List<Object> values = new ArrayList<>();
    for (Map<String, Object> row : query(sql, args)) {
      values.add(row.values().iterator().next());
    }
    return values;
  }
}
