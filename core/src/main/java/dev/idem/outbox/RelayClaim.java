package dev.idem.outbox;

import io.r2dbc.spi.Connection;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The claim step of an {@link OutboxRelay}'s round: locks up to {@code batchSize} due pending
 * rows, oldest first, in the round's transaction ({@code FOR UPDATE SKIP LOCKED}, so that other
 * workers and relays skip them until the round commits or rolls back).
 *
 * <p>Under {@link RelayOrdering#BY_KEY} a row is claimable only when no row of its key with a
 * smaller {@code seq} is unsent (pending, waiting for a retry, parked, or claimed by another
 * round). Why this holds across any number of relays and workers: the statement reads one
 * snapshot, in which every earlier row of the key is {@code SENT}; a row is marked {@code SENT}
 * only in the transaction that published it after its destination confirmed it, so every earlier
 * row was confirmed before this claim began. A row another round still holds is either locked
 * (skipped) or, when that round committed meanwhile, re-read by PostgreSQL in its new version,
 * which no longer qualifies. What the snapshot cannot see is a row whose transaction has not
 * committed: such a row is ordered by its commit, not by its {@code seq} (see
 * {@link RelayOrdering#BY_KEY}).
 */
final class RelayClaim {

  private final String sql;
  private final int batchSize;

  RelayClaim(String table, RelayOrdering ordering, int batchSize) {
    String keyOrder = ordering == RelayOrdering.BY_KEY
        ? " AND NOT EXISTS (SELECT 1 FROM " + table
            + " e WHERE e.message_key = o.message_key AND e.status <> 'SENT' AND e.seq < o.seq)"
        : "";
    this.sql = "SELECT " + PostgresOutbox.COLUMNS + " FROM " + table + " o"
        + " WHERE o.status = 'PENDING' AND o.next_attempt_at <= now()" + keyOrder
        + " ORDER BY o.seq LIMIT $1 FOR UPDATE OF o SKIP LOCKED";
    this.batchSize = batchSize;
  }

  /** Claims the round's batch, in {@code seq} order; empty when nothing is due. */
  Mono<List<OutboxMessage>> claim(Connection connection) {
    return Flux.from(connection.createStatement(sql).bind(0, batchSize).execute())
        .concatMap(result -> result.map((row, meta) -> PostgresOutbox.message(row)))
        .collectList();
  }
}
