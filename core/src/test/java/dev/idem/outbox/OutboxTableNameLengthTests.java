package dev.idem.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Index names derived from the outbox table must fit PostgreSQL's 63-byte identifiers; a longer table is refused when built. */
class OutboxTableNameLengthTests {

  private final ConnectionFactory unused = ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");

  @Test
  void outboxRefusesATableWhoseIndexNamesWouldExceedTheLimitNamingTheLimitAndTheLongestName() {
    String table = "t".repeat(PostgresOutbox.MAX_TABLE_NAME_LENGTH + 1);

    assertThatThrownBy(() -> PostgresOutbox.create(unused, table))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("table '" + table + "' is too long: the name " + table + "_")
        .hasMessageContaining("_idx derived from it would be 64 bytes, over PostgreSQL's identifier limit of 63 bytes")
        .hasMessageEndingWith("Use a table name of at most 51 characters (not counting a schema), was 52");
  }

  @Test
  void theLongestNameIsAcceptedAndEveryIndexNameFits() {
    String table = "o".repeat(PostgresOutbox.MAX_TABLE_NAME_LENGTH);
    String longest = "";
    for (String sql : PostgresOutbox.create(unused, "billing." + table).schemaStatements()) {
      Matcher words = Pattern.compile("\\b" + table + "\\w*").matcher(sql);
      while (words.find()) {
        longest = words.group().length() > longest.length() ? words.group() : longest;
      }
    }
    assertThat(longest).hasSize(63);
    assertThat(PostgresOutbox.create(unused, table).withoutNotify().channel()).isEqualTo(table);
  }
}
