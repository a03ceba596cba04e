package dev.idem.internal;

import java.util.regex.Pattern;

/** Validation for names that reach SQL text. Nothing user-supplied is concatenated unchecked. */
public final class Identifiers {

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
      throw new IllegalArgumentException(setting + " must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 characters, optionally schema-qualified), was: " + name);
    }
    return name;
  }
}
