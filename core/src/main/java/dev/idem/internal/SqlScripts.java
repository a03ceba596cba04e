package dev.idem.internal;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Shipped SQL migrations used as templates: read from the classpath, renamed after a configured
 * (validated) table, and split into statements.
 */
public final class SqlScripts {

  private SqlScripts() {}

  /**
   * Reads a classpath resource as UTF-8.
   *
   * @param resource the absolute resource name
   * @return the text
   * @throws IllegalStateException when the resource is missing
   */
  public static String read(String resource) {
    try (InputStream in = SqlScripts.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("Missing " + resource + " on the classpath");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Renames every whole word that starts with {@code baseName}: the word {@code baseName} itself
   * becomes {@code table} (possibly schema-qualified), and {@code baseName + suffix} (index,
   * function and channel names) becomes the unqualified table name plus the suffix, which
   * PostgreSQL puts in the table's schema.
   *
   * @param script the template
   * @param baseName the name used in the template, e.g. {@code idem_outbox}
   * @param table the validated table name
   * @return the renamed script
   */
  public static String rename(String script, String baseName, String table) {
    return rename(script, baseName, table, false);
  }

  /**
   * As {@link #rename(String, String, String)}, but derived names (tables, functions) get the
   * table's schema too when {@code qualifyDerived} is set; index names must not be qualified.
   *
   * @param script the template
   * @param baseName the name used in the template
   * @param table the validated table name
   * @param qualifyDerived whether derived names get the table's schema
   * @return the renamed script
   */
  public static String rename(String script, String baseName, String table, boolean qualifyDerived) {
    Identifiers.requireSqlIdentifier("table", table);
    Identifiers.requireRoomForDerivedNames("table", table, derivedSuffixes(script, baseName));
    String unqualified = unqualified(table);
    String schema = qualifyDerived && table.contains(".") ? table.substring(0, table.indexOf('.') + 1) : "";
    Matcher names = words(baseName).matcher(script);
    StringBuilder out = new StringBuilder();
    while (names.find()) {
      String suffix = names.group(1);
      String replacement = suffix.isEmpty() ? table : schema + unqualified + suffix;
      names.appendReplacement(out, Matcher.quoteReplacement(replacement));
    }
    names.appendTail(out);
    return out.toString();
  }

  /**
   * The suffixes of the names a template derives from its table: every whole word that starts
   * with {@code baseName} and is longer, minus {@code baseName} (e.g. {@code _pending_idx}).
   *
   * @param script the template
   * @param baseName the table name used in the template
   * @return the suffixes, sorted, without repeats
   */
  public static SortedSet<String> derivedSuffixes(String script, String baseName) {
    SortedSet<String> suffixes = new TreeSet<>();
    Matcher names = words(baseName).matcher(script);
    while (names.find()) {
      if (!names.group(1).isEmpty()) {
        suffixes.add(names.group(1));
      }
    }
    return suffixes;
  }

  private static Pattern words(String baseName) {
    return Pattern.compile("\\b" + Pattern.quote(baseName) + "(\\w*)\\b");
  }

  /**
   * The table name without its schema.
   *
   * @param table a validated, possibly schema-qualified name
   * @return the last part
   */
  public static String unqualified(String table) {
    return table.contains(".") ? table.substring(table.indexOf('.') + 1) : table;
  }

  /**
   * Splits a script into statements at semicolons that end a line, outside dollar-quoted
   * bodies; lines that are only a comment are dropped.
   *
   * @param script the script
   * @return the statements, without their semicolons
   */
  public static List<String> statements(String script) {
    List<String> statements = new ArrayList<>();
    StringBuilder current = new StringBuilder();
    boolean inDollarQuote = false;
    for (String line : script.split("\n", -1)) {
      String trimmed = line.trim();
      if (!inDollarQuote && trimmed.startsWith("--")) {
        continue;
      }
      int dollars = count(line, "$$");
      if (dollars % 2 == 1) {
        inDollarQuote = !inDollarQuote;
      }
      current.append(line).append('\n');
      if (!inDollarQuote && trimmed.endsWith(";")) {
        String statement = current.toString().trim();
        statements.add(statement.substring(0, statement.length() - 1).trim());
        current.setLength(0);
      }
    }
    if (!current.toString().isBlank()) {
      statements.add(current.toString().trim());
    }
    return statements;
  }

  private static int count(String text, String what) {
    int n = 0;
    for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + what.length())) {
      n++;
    }
    return n;
  }
}
