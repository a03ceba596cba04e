package dev.idem.testing;

import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.PostgresOutbox;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Test support for the outbox: writes rows as a handler would, counts rows by status. */
public final class OutboxTesting {

  private OutboxTesting() {}

  /**
   * Writes rows in one committed transaction through {@link PostgresOutbox#add}.
   *
   * @param connections where the connection comes from
   * @param outbox the outbox
   * @param records the rows
   * @return their message ids, in order
   */
  public static List<String> write(ConnectionFactory connections, PostgresOutbox outbox, List<OutboxRecord> records) {
    return Mono.usingWhen(connections.create(),
        c -> Mono.from(c.beginTransaction())
            .thenMany(Flux.fromIterable(records).concatMap(r -> outbox.add(c, r)))
            .collectList()
            .flatMap(ids -> Mono.from(c.commitTransaction()).thenReturn(ids)),
        Connection::close).block(Duration.ofSeconds(120));
  }

  /**
   * Rows of an outbox with a status.
   *
   * @param postgres the database
   * @param outbox the outbox
   * @param status {@code PENDING}, {@code SENT} or {@code PARKED}
   * @return the count
   */
  public static long rows(PostgresService postgres, PostgresOutbox outbox, String status) {
    return postgres.count("SELECT count(*) FROM " + outbox.table() + " WHERE status = $1", status);
  }
}
