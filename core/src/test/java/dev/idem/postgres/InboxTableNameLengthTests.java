package dev.idem.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Names derived from the inbox table must fit PostgreSQL's 63-byte identifiers; a longer table is refused when built. */
class InboxTableNameLengthTests {

  private final ConnectionFactory unused = ConnectionFactories.get("r2dbc:postgresql://nobody@127.0.0.1:1/none");

  @Test
  void plainInboxRefusesATableWhoseIndexNameWouldExceedTheLimitNamingTheLimitAndTheLongestName() {
    String table = "t".repeat(PostgresInbox.MAX_TABLE_NAME_LENGTH + 1);

    assertThatThrownBy(() -> PostgresInbox.create(unused, table))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("table '" + table + "' is too long: the name " + table
            + "_processed_at_idx derived from it would be 64 bytes,"
            + " over PostgreSQL's identifier limit of 63 bytes (PostgreSQL would truncate it, and truncated names can collide)."
            + " Use a table name of at most 46 characters (not counting a schema), was 47");
  }

  @Test
  void rotatingInboxRefusesATableWhoseLayoutOrFunctionNameWouldExceedTheLimit() {
    String table = "t".repeat(PostgresInbox.MAX_ROTATING_TABLE_NAME_LENGTH + 1);

    assertThatThrownBy(() -> PostgresInbox.rotating(unused, table, Duration.ofHours(1), 1_000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("table '" + table + "' is too long: the name " + table + "_")
        .hasMessageContaining("would be 64 bytes, over PostgreSQL's identifier limit of 63 bytes")
        .hasMessageEndingWith("Use a table name of at most 56 characters (not counting a schema), was 57");
  }

  @Test
  void longestNamesAreAcceptedAndEveryNameTheirSchemaDerivesFits() {
    String plain = "p".repeat(PostgresInbox.MAX_TABLE_NAME_LENGTH);
    String rotating = "r".repeat(PostgresInbox.MAX_ROTATING_TABLE_NAME_LENGTH);

    assertThat(longestName(PostgresInbox.create(unused, plain).schemaStatements(), plain)).isEqualTo(plain + "_processed_at_idx")
        .hasSize(63);
    PostgresInbox inbox = PostgresInbox.rotating(unused, rotating, Duration.ofHours(1), 1_000);
    assertThat(longestName(inbox.schemaStatements(), rotating)).hasSize(63);
    assertThat(inbox.slotPartition(inbox.rotatingLayout().slots() - 1)).isEqualTo(rotating + "_p1001").hasSizeLessThan(63);
  }

  @Test
  void theSchemaDoesNotCount() {
    String schema = "s".repeat(63);

    assertThat(PostgresInbox.create(unused, schema + "." + "p".repeat(PostgresInbox.MAX_TABLE_NAME_LENGTH)).table())
        .startsWith(schema + ".");
    assertThatThrownBy(() -> PostgresInbox.create(unused, schema + "." + "p".repeat(PostgresInbox.MAX_TABLE_NAME_LENGTH + 1)))
        .hasMessageContaining("at most 46 characters (not counting a schema)");
  }

  /** The longest whole word of the statements that starts with the table's name. */
  static String longestName(List<String> statements, String table) {
    String longest = "";
    for (String sql : statements) {
      Matcher words = Pattern.compile("\\b" + table + "\\w*").matcher(sql);
      while (words.find()) {
        longest = words.group().length() > longest.length() ? words.group() : longest;
      }
    }
    return longest;
  }
}
