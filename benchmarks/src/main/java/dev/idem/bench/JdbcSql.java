package dev.idem.bench;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** The dedup statement of the per-poll peers. */
final class JdbcSql {
  private JdbcSql() {}

  /** One multi-row insert returning the ids that were new, as Idem's batch mode does. */
  static String dedupMany(String inbox) {
    return "INSERT INTO " + inbox + " (consumer, message_id) SELECT ?, id FROM unnest(?::text[]) AS ids(id) ORDER BY id"
        + " ON CONFLICT DO NOTHING RETURNING message_id";
  }

  static Set<String> dedupMany(Connection c, PreparedStatement dedup, String consumer, List<String> ids) throws SQLException {
    Array array = c.createArrayOf("text", ids.toArray());
    dedup.setString(1, consumer);
    dedup.setArray(2, array);
    Set<String> fresh = new HashSet<>();
    try (ResultSet rs = dedup.executeQuery()) {
      while (rs.next()) {
        fresh.add(rs.getString(1));
      }
    }
    array.free();
    return fresh;
  }
}
