package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every Java snippet in the README is quoted from code the build compiles: each {@code ```java}
 * block must appear, line by line (indentation aside), in a source file of the repository. A
 * snippet edited in the README but not in the code, or the other way round, fails here.
 */
class ReadmeQuotesTests {

  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

  @Test
  void everyJavaSnippetOfTheReadmeIsQuotedFromCompiledSource() throws IOException {
    List<List<String>> snippets = javaSnippets(Files.readAllLines(ROOT.resolve("README.md")));
    List<List<String>> sources = sourceFiles();

    assertThat(snippets).as("Java snippets in README.md").isNotEmpty();
    List<String> unquoted = new ArrayList<>();
    for (List<String> snippet : snippets) {
      if (sources.stream().noneMatch(source -> containsInOrder(source, snippet))) {
        unquoted.add(String.join("\n", snippet));
      }
    }
    assertThat(unquoted)
        .as("README snippets found in no source file under */src (edit the code and the README together)")
        .isEmpty();
  }

  @Test
  void aSnippetIsFoundOnlyWhenItsLinesAreContiguousInTheSource() {
    List<String> source = List.of("a();", "b();", "c();");

    assertThat(containsInOrder(source, List.of("b();", "c();"))).isTrue();
    assertThat(containsInOrder(source, List.of("a();", "c();"))).isFalse();
    assertThat(containsInOrder(source, List.of("c();", "d();"))).isFalse();
  }

  /** The non-blank, trimmed lines of each {@code ```java} block. */
  private static List<List<String>> javaSnippets(List<String> readme) {
    List<List<String>> snippets = new ArrayList<>();
    List<String> current = null;
    for (String line : readme) {
      if (current == null && line.strip().equals("```java")) {
        current = new ArrayList<>();
      } else if (current != null && line.strip().equals("```")) {
        snippets.add(current);
        current = null;
      } else if (current != null && !line.isBlank()) {
        current.add(line.strip());
      }
    }
    return snippets;
  }

  /** The non-blank, trimmed lines of every Java file under a module's {@code src}. */
  private static List<List<String>> sourceFiles() throws IOException {
    try (Stream<Path> files = Files.walk(ROOT)) {
      return files
          .filter(path -> path.toString().endsWith(".java"))
          .filter(path -> path.toString().contains("/src/"))
          .filter(path -> !path.toString().contains("/target/"))
          .map(ReadmeQuotesTests::strippedLines)
          .toList();
    }
  }

  private static List<String> strippedLines(Path file) {
    try {
      return Files.readAllLines(file).stream().filter(line -> !line.isBlank()).map(String::strip).toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static boolean containsInOrder(List<String> source, List<String> snippet) {
    return !snippet.isEmpty() && java.util.Collections.indexOfSubList(source, snippet) >= 0;
  }
}
