package dev.idem.bench;

import java.sql.Array;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The JDBC side of the Spring peers as a Spring application writes it: a {@link JdbcTemplate} and
 * a {@link TransactionTemplate} (what {@code @Transactional} on the listener method does) over one
 * connection, which is all a listener container at its default concurrency of 1 uses.
 */
final class SpringJdbc implements AutoCloseable {

  private final SingleConnectionDataSource dataSource;
  private final JdbcTemplate jdbc;
  private final TransactionTemplate tx;
  private final String dedup;
  private final String dedupMany;
  private final String credit;

  SpringJdbc(Database db, Database.Tables tables) throws SQLException {
    this.dataSource = new SingleConnectionDataSource(db.connect(), true);
    this.jdbc = new JdbcTemplate(dataSource);
    this.tx = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    this.dedup = "INSERT INTO " + tables.inbox() + " (consumer, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING";
    this.dedupMany = JdbcSql.dedupMany(tables.inbox());
    this.credit = "UPDATE " + tables.accounts() + " SET balance = balance + ? WHERE id = ?";
  }

  /** One message in a transaction of its own: the dedup insert, the UPDATE when new. Returns whether it was applied. */
  boolean perRecord(String id, Payment payment) {
    Boolean applied = tx.execute(status -> {
      boolean fresh = jdbc.update(dedup, "spring", id) == 1;
      if (fresh) {
        jdbc.update(credit, payment.amountCents(), payment.account());
      }
      return fresh;
    });
    return Boolean.TRUE.equals(applied);
  }

  /** A poll in one transaction: one dedup insert returning the new ids, a JDBC batch of UPDATEs. Returns what was applied. */
  boolean[] perPoll(List<String> ids, List<Payment> payments) {
    return tx.execute(status -> {
      Array array = jdbc.execute((ConnectionCallback<Array>) c -> c.createArrayOf("text", ids.toArray()));
      Set<String> fresh = new HashSet<>(jdbc.queryForList(dedupMany, String.class, "spring", array));
      boolean[] applied = PollWriter.applied(ids, fresh);
      List<Object[]> credits = new ArrayList<>();
      for (int i = 0; i < ids.size(); i++) {
        if (applied[i]) {
          credits.add(new Object[]{payments.get(i).amountCents(), payments.get(i).account()});
        }
      }
      jdbc.batchUpdate(credit, credits);
      return applied;
    });
  }

  @Override
  public void close() {
    dataSource.destroy();
  }
}
