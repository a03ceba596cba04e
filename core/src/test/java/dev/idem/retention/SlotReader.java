package dev.idem.retention;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Holds a slot partition's lock (ACCESS SHARE, as a reader does) in an open transaction until released. */
final class SlotReader {
  private final Connection connection;
  private final AtomicBoolean released = new AtomicBoolean();

  SlotReader(ConnectionFactory pool, String partition) {
    connection = Mono.from(pool.create()).block(RetentionIntegrationTests.TIMEOUT);
    Mono.from(connection.beginTransaction()).block(RetentionIntegrationTests.TIMEOUT);
    Flux.from(connection.createStatement("SELECT count(*) FROM " + partition).execute())
        .concatMap(r -> r.map(row -> row.get(0, Long.class)))
        .blockLast(RetentionIntegrationTests.TIMEOUT);
  }

  void release() {
    if (released.compareAndSet(false, true)) {
      Mono.from(connection.rollbackTransaction()).then(Mono.from(connection.close())).block(RetentionIntegrationTests.TIMEOUT);
    }
  }
}
