package dev.idem.examples;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import reactor.core.publisher.Mono;

/** A one-off query on any R2DBC URL, for checking the embedded default. */
final class PostgresServiceLike {

  private PostgresServiceLike() {}

  static long count(String url, String sql) {
    return Mono.usingWhen(ConnectionFactories.get(url).create(),
        c -> Mono.from(c.createStatement(sql).execute())
            .flatMap(r -> Mono.from(r.map((row, meta) -> ((Number) row.get(0)).longValue()))),
        Connection::close).block(Duration.ofSeconds(30));
  }
}
