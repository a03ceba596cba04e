package dev.idem.postgres;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.Objects;

/**
 * Builds r2dbc-pool connection pools with settings that suit the pipeline: connections are
 * validated on acquire (a connection lost while the database was down is discarded, not handed
 * out), acquiring waits at most {@link #DEFAULT_ACQUIRE_TIMEOUT} and creating a connection at
 * most {@link #DEFAULT_CONNECT_TIMEOUT}, so an unreachable database surfaces as an
 * infrastructure error that the pipeline backs off on.
 */
public final class PostgresConnections {

  /**
   * A suggested pool size: {@value}. Both {@code pool} methods take the size; keep it at least the
   * consumer's concurrency.
   */
  public static final int DEFAULT_POOL_SIZE = 16;
  /** Default time to wait for a pooled connection: 10 s. */
  public static final Duration DEFAULT_ACQUIRE_TIMEOUT = Duration.ofSeconds(10);
  /** Default time to open a new connection: 5 s. */
  public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(5);

  private PostgresConnections() {}

  /**
   * A pool over an R2DBC URL such as {@code r2dbc:postgresql://user@127.0.0.1:5432/test}.
   *
   * @param r2dbcUrl the R2DBC URL
   * @param maxSize the maximum number of connections, at least 1
   * @return the pool; dispose it when done
   */
  public static ConnectionPool pool(String r2dbcUrl, int maxSize) {
    Objects.requireNonNull(r2dbcUrl, "r2dbcUrl");
    return pool(ConnectionFactories.get(r2dbcUrl), maxSize);
  }

  /**
   * A pool over a connection factory.
   *
   * @param connectionFactory the underlying factory
   * @param maxSize the maximum number of connections, at least 1
   * @return the pool; dispose it when done
   */
  public static ConnectionPool pool(ConnectionFactory connectionFactory, int maxSize) {
    Objects.requireNonNull(connectionFactory, "connectionFactory");
    if (maxSize < 1) {
      throw new IllegalArgumentException("maxSize must be at least 1, was " + maxSize);
    }
    return new ConnectionPool(ConnectionPoolConfiguration.builder(connectionFactory)
        .initialSize(0)
        .maxSize(maxSize)
        .acquireRetry(0)
        .maxAcquireTime(DEFAULT_ACQUIRE_TIMEOUT)
        .maxCreateConnectionTime(DEFAULT_CONNECT_TIMEOUT)
        .maxIdleTime(Duration.ofMinutes(5))
        .build());
  }
}
