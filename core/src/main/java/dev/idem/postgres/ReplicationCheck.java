package dev.idem.postgres;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Warns, once per inbox, when the primary an inbox writes to has standbys and none of them is
 * synchronous: a COMMIT that Idem confirmed (and whose message it then acknowledged) may then not
 * have reached any standby, and a failover after a crash of the primary loses it with its dedup row.
 */
final class ReplicationCheck {

  private static final Logger log = LoggerFactory.getLogger(PostgresInbox.class);

  /**
   * Physical standbys of this server when it is a primary (logical replication's walsenders, which
   * own a logical slot, are not standbys); {@code sync_state} is NULL for roles without
   * {@code pg_read_all_stats}, so the visible count says whether the answer can be trusted.
   */
  static final String SQL = "SELECT count(*) AS standbys,"
      + " count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) AS synchronous,"
      + " count(sync_state) AS visible,"
      + " current_setting('synchronous_standby_names') AS names"
      + " FROM pg_stat_replication"
      + " WHERE NOT pg_is_in_recovery()"
      + " AND pid NOT IN (SELECT active_pid FROM pg_replication_slots WHERE slot_type = 'logical' AND active_pid IS NOT NULL)";

  private final ConnectionFactory connectionFactory;
  private final String table;
  private final AtomicBoolean warned = new AtomicBoolean();

  ReplicationCheck(ConnectionFactory connectionFactory, String table) {
    this.connectionFactory = connectionFactory;
    this.table = table;
  }

  /** Emits whether replication is asynchronous; logs the WARN the first time it is; never errors. */
  Mono<Boolean> run() {
    return Mono.defer(() -> Mono.usingWhen(connectionFactory.create(), this::query, Connection::close))
        .map(state -> {
          boolean asynchronous = state.standbys() > 0 && state.visible() > 0 && state.synchronous() == 0;
          if (asynchronous && warned.compareAndSet(false, true)) {
            log.warn("The PostgreSQL primary of the inbox {} has {} standby(s) and none is synchronous "
                + "(pg_stat_replication.sync_state; synchronous_standby_names = '{}'): a transaction Idem saw committed, "
                + "and whose message it then acknowledged, may not have reached a standby, and a failover after a crash "
                + "of the primary would lose its effect with its dedup row. Turn on synchronous replication "
                + "(docs/operating.md, \"PostgreSQL high availability\")", table, state.standbys(), state.names());
          } else if (state.standbys() > 0 && state.visible() == 0) {
            log.debug("The PostgreSQL primary of the inbox {} has {} standby(s), but this role cannot read their "
                + "sync_state (it needs pg_read_all_stats); replication mode not checked", table, state.standbys());
          }
          return asynchronous;
        })
        .onErrorResume(e -> {
          log.debug("Could not check the replication of the inbox {}'s database: {}", table, e.toString());
          return Mono.just(false);
        });
  }

  private record State(long standbys, long synchronous, long visible, String names) {}

  private Mono<State> query(Connection connection) {
    return Flux.from(connection.createStatement(SQL).execute())
        .concatMap(result -> result.map(row -> new State(row.get("standbys", Long.class), row.get("synchronous", Long.class),
            row.get("visible", Long.class), row.get("names", String.class))))
        .next();
  }
}
