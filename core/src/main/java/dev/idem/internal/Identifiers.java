package dev.idem.internal;

import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.regex.Pattern;

/** Validation for names that reach SQL text. Nothing user-supplied is concatenated unchecked. */
public final class Identifiers {

  /**
   * PostgreSQL's longest identifier: {@value} bytes ({@code NAMEDATALEN - 1}). A longer name is
   * not refused by the server but silently truncated, so two derived names can become one.
   */
  public static final int MAX_IDENTIFIER_BYTES = 63;

  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?");

  private Identifiers() {}

  /**
   * Checks that {@code name} is a plain, optionally schema-qualified SQL identifier.
   *
   * @param setting the setting's name, for the error message
   * @param name the candidate identifier
   * @return the name
   * @throws IllegalArgumentException naming the setting when the name is not a plain identifier
   */
  public static String requireSqlIdentifier(String setting, String name) {
    if (name == null || !IDENTIFIER.matcher(name).matches()) {
      throw new IllegalArgumentException(setting
          + " must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters, optionally schema-qualified), was: "
          + name);
    }
    return name;
  }

  /**
   * Checks that every name derived from a table name fits PostgreSQL's identifier limit of
   * {@value #MAX_IDENTIFIER_BYTES} bytes. A derived name is the table's unqualified name plus a
   * suffix (an index, a function, a partition); it lives in the table's schema, so the schema does
   * not count. Identifiers are ASCII here ({@link #requireSqlIdentifier}), so bytes are characters.
   *
   * @param setting the setting's name, for the error message
   * @param table a name that passed {@link #requireSqlIdentifier}
   * @param suffixes what is appended to the unqualified table name to derive names
   * @return the table name
   * @throws IllegalArgumentException naming the setting, the limit, the longest derived name and
   *     the longest table name allowed, when a derived name would be longer than the limit
   */
  public static String requireRoomForDerivedNames(String setting, String table, Collection<String> suffixes) {
    String unqualified = table.contains(".") ? table.substring(table.indexOf('.') + 1) : table;
    String longestSuffix = "";
    for (String suffix : suffixes) {
      if (bytes(suffix) > bytes(longestSuffix)) {
        longestSuffix = suffix;
      }
    }
    String derived = unqualified + longestSuffix;
    if (bytes(derived) > MAX_IDENTIFIER_BYTES) {
      int longestBase = MAX_IDENTIFIER_BYTES - bytes(longestSuffix);
      throw new IllegalArgumentException(setting + " '" + table + "' is too long: the name " + derived
          + " derived from it would be "
          + bytes(derived) + " bytes, over PostgreSQL's identifier limit of " + MAX_IDENTIFIER_BYTES + " bytes (PostgreSQL would"
          + " truncate it, and truncated names can collide). Use a " + setting + " name of at most " + longestBase
          + " characters (not counting a schema), was " + bytes(unqualified));
    }
    return table;
  }

  private static int bytes(String name) {
    return name.getBytes(StandardCharsets.UTF_8).length;
  }
}
