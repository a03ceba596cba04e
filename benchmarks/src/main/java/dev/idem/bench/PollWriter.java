package dev.idem.bench;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What a hand-written per-poll loop does with one poll, in one transaction: one dedup insert
 * returning the ids that were new, the effect of those (of repeats inside one poll, only the
 * first), COMMIT. The broker side (commit the offsets, ack the poll) is the feed's.
 */
interface PollWriter extends AutoCloseable {

  /**
   * Writes one poll and commits.
   *
   * @return for each message, whether its effect was applied (false: a duplicate)
   */
  boolean[] write(List<String> ids, List<Payment> payments) throws Exception;

  @Override
  void close() throws SQLException;

  /** Which of {@code ids} to apply, given the ids the dedup insert found new. */
  static boolean[] applied(List<String> ids, Set<String> fresh) {
    boolean[] applied = new boolean[ids.size()];
    Set<String> left = new HashSet<>(fresh);
    for (int i = 0; i < ids.size(); i++) {
      applied[i] = left.remove(ids.get(i));
    }
    return applied;
  }

  /** Row 3: JDBC, the UPDATEs as one JDBC batch. */
  static PollWriter jdbc(Database db, Database.Tables tables) throws SQLException {
    java.sql.Connection c = db.connect();
    c.setAutoCommit(false);
    PreparedStatement dedup = c.prepareStatement(JdbcSql.dedupMany(tables.inbox()));
    PreparedStatement credit = c.prepareStatement("UPDATE " + tables.accounts() + " SET balance = balance + ? WHERE id = ?");
    return new PollWriter() {
      @Override
      public boolean[] write(List<String> ids, List<Payment> payments) throws SQLException {
        boolean[] applied = applied(ids, JdbcSql.dedupMany(c, dedup, "jdbc", ids));
        for (int i = 0; i < ids.size(); i++) {
          if (applied[i]) {
            credit.setLong(1, payments.get(i).amountCents());
            credit.setInt(2, payments.get(i).account());
            credit.addBatch();
          }
        }
        credit.executeBatch();
        c.commit();
        return applied;
      }

      @Override
      public void close() throws SQLException {
        try (c; dedup; credit) {
          // closes all three
        }
      }
    };
  }

  /**
   * Rows 3b and 3c: the same on Idem's R2DBC driver, one connection, a reactive chain per poll
   * awaited by the loop: with one UPDATE per message, sent one after the other ({@code setBased}
   * false, the floor for a per-message {@code Handler}), or one UPDATE of the per-account sums
   * (the floor for a set-based {@code BatchHandler}).
   */
  static PollWriter r2dbc(Database db, Database.Tables tables, boolean setBased) {
    Connection connection = Mono.from(ConnectionFactories.get(db.r2dbcUrl()).create()).block();
    String dedup = "INSERT INTO " + tables.inbox()
        + " (consumer, message_id) SELECT $1, id FROM unnest($2::text[]) AS ids(id) ORDER BY id"
        + " ON CONFLICT DO NOTHING RETURNING message_id";
    String credit = "UPDATE " + tables.accounts() + " SET balance = balance + $1 WHERE id = $2";
    String sums = "UPDATE " + tables.accounts()
        + " a SET balance = a.balance + d.amount FROM (SELECT account, sum(amount) AS amount"
        + " FROM unnest($1::bigint[], $2::bigint[]) AS e(account, amount) GROUP BY account) d WHERE a.id = d.account";
    return new PollWriter() {
      @Override
      public boolean[] write(List<String> ids, List<Payment> payments) {
        return Mono.from(connection.beginTransaction())
            .then(Flux.from(connection.createStatement(dedup).bind(0, "r2dbc").bind(1, ids.toArray(String[]::new)).execute())
                .flatMap(result -> result.map((row, meta) -> row.get(0, String.class))).collect(Collectors.toSet()))
            .flatMap(fresh -> {
              boolean[] applied = applied(ids, fresh);
              List<Payment> effects = new ArrayList<>();
              for (int i = 0; i < applied.length; i++) {
                if (applied[i]) {
                  effects.add(payments.get(i));
                }
              }
              return effects(effects).then(Mono.from(connection.commitTransaction())).thenReturn(applied);
            })
            .block();
      }

      private Mono<Void> effects(List<Payment> effects) {
        if (effects.isEmpty()) {
          return Mono.empty();
        }
        if (!setBased) {
          return Flux.fromIterable(effects)
              .concatMap(
                  p -> Flux.from(connection.createStatement(credit).bind(0, p.amountCents()).bind(1, p.account()).execute())
                      .flatMap(Result::getRowsUpdated))
              .then();
        }
        Long[] accounts = effects.stream().map(p -> (long) p.account()).toArray(Long[]::new);
        Long[] amounts = effects.stream().map(Payment::amountCents).toArray(Long[]::new);
        return Flux.from(connection.createStatement(sums).bind(0, accounts).bind(1, amounts).execute())
            .flatMap(Result::getRowsUpdated).then();
      }

      @Override
      public void close() {
        Mono.from(connection.close()).block();
      }
    };
  }
}
