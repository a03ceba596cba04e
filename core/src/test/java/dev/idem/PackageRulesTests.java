package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The package rules of {@code dev.idem}'s javadoc, read off core's sources: imports run one way,
 * API, then pipeline, then internal.
 */
class PackageRulesTests {

  private static final Path SOURCES = Path.of("src/main/java/dev/idem");
  private static final Pattern IMPORT = Pattern.compile("^import (?:static )?(dev\\.idem\\.[\\w.]+);", Pattern.MULTILINE);

  @Test
  void onlyTheFacadeOfTheApiImportsThePipeline() {
    List<String> importers = filesImporting("dev.idem.pipeline.").stream()
        .filter(file -> !file.startsWith(SOURCES.resolve("pipeline")))
        .map(Path::toString).toList();

    assertThat(importers).containsExactly(SOURCES.resolve("IdempotentConsumer.java").toString());
  }

  @Test
  void thePipelineNeverImportsTheFacade() {
    assertThat(importsIn(SOURCES.resolve("pipeline"))).isNotEmpty().noneMatch(i -> i.equals("dev.idem.IdempotentConsumer"));
  }

  @Test
  void theMachineryNeverImportsThePipelineOrTheFacade() {
    assertThat(importsIn(SOURCES.resolve("internal"))).isNotEmpty()
        .noneMatch(i -> i.startsWith("dev.idem.pipeline.") || i.equals("dev.idem.IdempotentConsumer"));
  }

  private static List<Path> filesImporting(String prefix) {
    try (Stream<Path> files = Files.walk(SOURCES)) {
      return files.filter(f -> f.toString().endsWith(".java"))
          .filter(f -> imports(f).stream().anyMatch(i -> i.startsWith(prefix))).sorted().toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static List<String> importsIn(Path dir) {
    try (Stream<Path> files = Files.list(dir)) {
      return files.filter(f -> f.toString().endsWith(".java")).flatMap(f -> imports(f).stream()).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static List<String> imports(Path file) {
    try {
      Matcher m = IMPORT.matcher(Files.readString(file));
      return m.results().map(r -> r.group(1)).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
