package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every default that README.md or a page of docs/ states is the code's: the value is followed by
 * a marker naming the public constant it comes from, {@code 1024<!-- default: IdempotentConsumer.DEFAULT_PREFETCH -->},
 * invisible on the rendered page, and this test reads the constant and compares. A number in the
 * default column of an options table ({@code | option | default | ...}) must carry such a marker,
 * and so must a number that prose states as the default of a consumer setting ("prefetch 1024 by
 * default"); a page that states a default the code does not have fails here.
 *
 * <p>Constants are read by reflection from the modules on this module's class path (core and both
 * adapters) and, for a class that is not on it (the Spring Boot starter), from its source: a
 * {@code public static final} field initialized with a literal, a {@code Duration.ofX(n)},
 * {@code Duration.ZERO} or an enum constant.
 */
class StatedDefaultsTests {

  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
  private static final Pattern MARKER = Pattern.compile("<!--\\s*default:\\s*([A-Za-z0-9_.]+)\\s*-->");
  private static final List<String> PACKAGES = List.of("dev.idem", "dev.idem.postgres", "dev.idem.retention", "dev.idem.outbox",
      "dev.idem.kafka", "dev.idem.rabbit", "dev.idem.spring", "dev.idem.internal");
  /** A number with its unit, as pages write durations and counts. */
  private static final Pattern NUMBER = Pattern
      .compile("(?<![\\w.,])((?:\\d{1,3}(?:,\\d{3})+|\\d+)(?:\\.\\d+)?)(?:\\s*(ms|s|min|m|h|d|seconds?|minutes?|hours?)\\b)?");
  /** Prose that states a consumer setting's default with a number near the setting's name (not a call such as {@code maxBatchSize(1)}). */
  private static final Pattern PROSE_DEFAULT = Pattern.compile(
      "(?i)(prefetch|maxBatchSize|max-batch-size|batches of up to|concurrency|batchMaxWait|slowMessageThreshold|transactionTimeout)"
          + "(?!\\()\\W{0,3}(?:\\(?default\\)?\\W{0,3})?((?:\\d{1,3}(?:,\\d{3})+|\\d+)(?:\\s*(?:ms|s)\\b)?)");

  private static List<Path> pages() throws IOException {
    List<Path> pages = new ArrayList<>();
    pages.add(ROOT.resolve("README.md"));
    try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
    }
    return pages;
  }

  @Test
  void everyMarkedDefaultEqualsTheConstantItNames() throws IOException {
    List<String> problems = new ArrayList<>();
    int markers = 0;
    for (Path page : pages()) {
      List<String> lines = prose(Files.readAllLines(page));
      for (int i = 0; i < lines.size(); i++) {
        Matcher m = MARKER.matcher(lines.get(i));
        while (m.find()) {
          markers++;
          String where = ROOT.relativize(page) + ":" + (i + 1) + ": ";
          String problem = check(lines.get(i).substring(0, m.start()).replaceAll("<!--.*?-->", ""), m.group(1));
          if (problem != null) {
            problems.add(where + problem);
          }
        }
      }
    }
    assertThat(markers).as("default markers in README.md and docs/").isGreaterThan(30);
    assertThat(problems).as("stated defaults that differ from the code").isEmpty();
  }

  @Test
  void everyNumberInADefaultColumnAndEveryProseDefaultOfASettingIsMarked() throws IOException {
    List<String> problems = new ArrayList<>();
    for (Path page : pages()) {
      List<String> lines = prose(Files.readAllLines(page));
      int defaultColumn = -1;
      for (int i = 0; i < lines.size(); i++) {
        String line = lines.get(i);
        String where = ROOT.relativize(page) + ":" + (i + 1) + ": ";
        String text = line.replaceAll("<!--.*?-->", "").toLowerCase(Locale.ROOT);
        if (text.contains("default") && !text.matches(".*\\b(old|previous)( per-message)? defaults?\\b.*")) {
          Matcher m = PROSE_DEFAULT.matcher(line);
          while (m.find()) {
            if (!MARKER.matcher(line.substring(m.end())).lookingAt()) {
              problems.add(
                  where + "\"" + m.group() + "\" states a default without a <!-- default: Class.CONSTANT --> marker after it");
            }
          }
        }
        if (!line.startsWith("|")) {
          defaultColumn = -1;
          continue;
        }
        List<String> cells = cells(line);
        if (defaultColumn < 0) {
          defaultColumn = cells.size() > 1 && cells.get(1).strip().equals("default") ? 1 : -2;
          continue;
        }
        if (defaultColumn < 1 || cells.size() <= defaultColumn || line.matches("^\\|[-|: ]+\\|?$")) {
          continue;
        }
        // Not quantities: SQLSTATE codes, percentages, literals in backticks (a URI's port); a
        // backticked value followed by its marker is checked by the other test.
        String masked = cells.get(defaultColumn).replaceAll("<!--.*?-->", "\u0000")
            .replaceAll("`[^`]*`", "``").replaceAll("\\b\\d{2}[0-9A-Z]\\d{2}\\b|\\d+%", "");
        Matcher n = NUMBER.matcher(masked);
        while (n.find()) {
          String after = masked.substring(n.end());
          if (!after.startsWith("\u0000")) {
            problems.add(where + "the default \"" + n.group()
                + "\" in the column 'default' has no <!-- default: Class.CONSTANT --> marker after it");
          }
        }
      }
    }
    assertThat(problems).as("defaults stated without naming the constant they come from").isEmpty();
  }

  @Test
  void aWrongFigureFailsTheCheck() {
    assertThat(check("prefetch 256", "IdempotentConsumer.DEFAULT_PREFETCH")).contains("1024");
    assertThat(check("batches of up to 64", "IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE")).contains("128");
    assertThat(check("`slowMessageThreshold` (default 3 s", "IdempotentConsumer.DEFAULT_SLOW_MESSAGE_THRESHOLD"))
        .contains("PT2S");
    assertThat(check("prefetch 1,024", "IdempotentConsumer.DEFAULT_PREFETCH")).isNull();
    assertThat(check("| 60s", "IdempotentConsumer.DEFAULT_TRANSACTION_TIMEOUT")).isNull();
    assertThat(check("| 1 min", "IdempotentConsumer.DEFAULT_STUCK_WARNING_INTERVAL")).isNull();
    assertThat(check("| `BY_KEY`", "IdempotentConsumer.DEFAULT_ORDERING")).isNull();
    assertThat(check("| `by-key`", "IdempotentConsumer.DEFAULT_ORDERING")).isNull();
    assertThat(check("| 20s", "IdemConsumerDefinition.DEFAULT_SHUTDOWN_GRACE_PERIOD")).isNull();
    assertThat(check("| 8", "IdempotentConsumer.NO_SUCH_FIELD")).contains("no public constant");
  }

  @Test
  void unmarkedDefaultsAreFound() {
    assertThat(PROSE_DEFAULT.matcher("the defaults are prefetch 256 and batches of up to 64").find()).isTrue();
    assertThat(PROSE_DEFAULT.matcher("the old default, `maxBatchSize(1)`, a call").find()).isFalse();
    assertThat(NUMBER.matcher("200 ms .. 10 s").results().map(java.util.regex.MatchResult::group).toList())
        .containsExactly("200 ms", "10 s");
  }

  /** Null when {@code before} ends with the value of {@code constant}, else what differs. */
  static String check(String before, String constant) {
    Object value;
    try {
      value = constant(constant);
    } catch (IllegalArgumentException e) {
      return e.getMessage();
    }
    String text = before.stripTrailing().replaceAll("`$", "").replaceAll("\\*+$", "").stripTrailing();
    if (value instanceof Number number) {
      Matcher m = Pattern.compile("((?:\\d{1,3}(?:,\\d{3})+|\\d+))$").matcher(text);
      return m.find() && new BigDecimal(m.group(1).replace(",", "")).compareTo(new BigDecimal(number.toString())) == 0
          ? null
          : "the page states \"" + tail(text) + "\" where " + constant + " is " + number;
    }
    if (value instanceof Duration duration) {
      Matcher m = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*(ms|s|min|m|h|d|seconds?|minutes?|hours?)?$").matcher(text);
      Duration stated = m.find() ? duration(m.group(1), m.group(2)) : null;
      return duration.equals(stated) ? null : "the page states \"" + tail(text) + "\" where " + constant + " is " + duration;
    }
    String name = String.valueOf(value);
    String spring = name.toLowerCase(Locale.ROOT).replace('_', '-');
    return text.endsWith(name) || text.endsWith(spring)
        ? null
        : "the page states \"" + tail(text) + "\" where " + constant + " is " + name;
  }

  private static Duration duration(String number, String unit) {
    BigDecimal n = new BigDecimal(number);
    if (unit == null) {
      return n.signum() == 0 ? Duration.ZERO : null;
    }
    long millis = switch (unit) {
      case "ms" -> 1;
      case "s", "second", "seconds" -> 1_000;
      case "m", "min", "minute", "minutes" -> 60_000;
      case "h", "hour", "hours" -> 3_600_000;
      default -> 86_400_000;
    };
    return Duration.ofMillis(n.multiply(BigDecimal.valueOf(millis)).longValueExact());
  }

  private static String tail(String text) {
    return text.length() <= 40 ? text : "..." + text.substring(text.length() - 40);
  }

  /** The value of {@code Class.FIELD}: by reflection, or from the class's source when it is not on the class path. */
  static Object constant(String reference) {
    int dot = reference.lastIndexOf('.');
    if (dot < 0) {
      throw new IllegalArgumentException("the marker names " + reference + ", not Class.CONSTANT");
    }
    String type = reference.substring(0, dot);
    String field = reference.substring(dot + 1);
    for (String pkg : PACKAGES) {
      Class<?> c;
      try {
        c = Class.forName(pkg + "." + type);
      } catch (ClassNotFoundException e) {
        continue;
      }
      try {
        Field f = c.getField(field);
        if (!Modifier.isStatic(f.getModifiers()) || !Modifier.isFinal(f.getModifiers())) {
          throw new IllegalArgumentException(reference + " is not a constant");
        }
        return f.get(null);
      } catch (NoSuchFieldException | IllegalAccessException e) {
        throw new IllegalArgumentException("no public constant " + reference);
      }
    }
    return fromSource(type, field, reference);
  }

  private static Object fromSource(String type, String field, String reference) {
    List<Path> sources;
    try (Stream<Path> files = Files.walk(ROOT)) {
      sources = files
          .filter(p -> p.getFileName().toString().equals(type + ".java") && p.toString().contains("/src/main/java/dev/idem/"))
          .toList();
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot look for " + type + ".java: " + e);
    }
    for (Path source : sources) {
      String text;
      try {
        text = Files.readString(source);
      } catch (IOException e) {
        throw new IllegalArgumentException("cannot read " + source + ": " + e);
      }
      Matcher m = Pattern.compile("public static final \\w+ " + field + " = ([^;]+);").matcher(text);
      if (!m.find()) {
        continue;
      }
      String init = m.group(1).strip();
      Matcher d = Pattern.compile("Duration\\.of(Millis|Seconds|Minutes|Hours)\\(([\\d_]+)L?\\)").matcher(init);
      if (d.matches()) {
        long n = Long.parseLong(d.group(2).replace("_", ""));
        return switch (d.group(1)) {
          case "Millis" -> Duration.ofMillis(n);
          case "Seconds" -> Duration.ofSeconds(n);
          case "Minutes" -> Duration.ofMinutes(n);
          default -> Duration.ofHours(n);
        };
      }
      if (init.equals("Duration.ZERO")) {
        return Duration.ZERO;
      }
      if (init.matches("[\\d_]+L?")) {
        return Long.parseLong(init.replace("_", "").replace("L", ""));
      }
      if (init.matches("\"[^\"]*\"")) {
        return init.substring(1, init.length() - 1);
      }
      if (init.matches("true|false|[A-Z]\\w*\\.[A-Z_0-9]+")) {
        return init.substring(init.lastIndexOf('.') + 1);
      }
      throw new IllegalArgumentException(
          reference + " is initialized with " + init + ", which this check cannot read: name a constant with a literal value");
    }
    throw new IllegalArgumentException("no public constant " + reference);
  }

  /** The lines outside code blocks; those inside are blanked, so that line numbers stay. */
  private static List<String> prose(List<String> lines) {
    List<String> prose = new ArrayList<>(lines);
    boolean inBlock = false;
    for (int i = 0; i < prose.size(); i++) {
      boolean fence = prose.get(i).strip().startsWith("```");
      if (inBlock || fence) {
        prose.set(i, "");
      }
      if (fence) {
        inBlock = !inBlock;
      }
    }
    return prose;
  }

  /** A table row's cells, without the outer pipes; a pipe inside backticks does not split. */
  private static List<String> cells(String row) {
    List<String> cells = new ArrayList<>();
    StringBuilder cell = new StringBuilder();
    boolean code = false;
    for (int i = 1; i < row.length(); i++) {
      char c = row.charAt(i);
      if (c == '`') {
        code = !code;
      }
      if (c == '|' && !code) {
        cells.add(cell.toString());
        cell.setLength(0);
      } else {
        cell.append(c);
      }
    }
    return cells;
  }
}
