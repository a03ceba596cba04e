package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class IdentifiersTests {

  @Test
  void aDerivedNameOverSixtyThreeBytesIsRefusedNamingTheSettingTheLimitTheDerivedNameAndTheLongestBaseName() {
    String table = "t".repeat(47);

    assertThatThrownBy(() -> Identifiers.requireRoomForDerivedNames("table", table, List.of("_key_idx", "_processed_at_idx")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("table '" + table + "' is too long: the name " + table
            + "_processed_at_idx derived from it would be 64 bytes,"
            + " over PostgreSQL's identifier limit of 63 bytes (PostgreSQL would truncate it, and truncated names can collide)."
            + " Use a table name of at most 46 characters (not counting a schema), was 47");
  }

  @Test
  void theLongestBaseNameIsAcceptedAndTheSchemaDoesNotCount() {
    String longest = "t".repeat(46);
    String schema = "s".repeat(63);

    assertThat(Identifiers.requireRoomForDerivedNames("table", longest, List.of("_processed_at_idx"))).isEqualTo(longest);
    assertThat(Identifiers.requireRoomForDerivedNames("table", schema + "." + longest, List.of("_processed_at_idx")))
        .isEqualTo(schema + "." + longest);
    assertThatThrownBy(
        () -> Identifiers.requireRoomForDerivedNames("table", schema + ".t" + longest, List.of("_processed_at_idx")))
        .hasMessageContaining("the name t" + longest + "_processed_at_idx derived from it would be 64 bytes");
  }

  @Test
  void withoutDerivedNamesOnlyTheIdentifierRuleApplies() {
    String longest = "t".repeat(63);

    assertThat(Identifiers.requireRoomForDerivedNames("table", Identifiers.requireSqlIdentifier("table", longest), List.of()))
        .isEqualTo(longest);
    assertThatThrownBy(() -> Identifiers.requireSqlIdentifier("table", longest + "t"))
        .hasMessageContaining("at most 63 characters");
  }

  @Test
  void derivedSuffixesAreTheWholeWordsThatExtendTheTemplatesTableName() {
    String script = "CREATE TABLE t_x (a int);\nCREATE INDEX t_x_a_idx ON t_x (a);\nSELECT 't_x_p' || 1; -- a_t_x is another word\n";

    assertThat(SqlScripts.derivedSuffixes(script, "t_x")).containsExactly("_a_idx", "_p");
  }
}
