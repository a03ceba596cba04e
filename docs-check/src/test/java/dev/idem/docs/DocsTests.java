package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Keeps README.md and docs/*.md in step with the code: every included code block equals the
 * source region it names, every Java and XML block is included from a file the build compiles,
 * and every relative link and anchor resolves.
 *
 * <p>Run alone: {@code mvn -o -q -pl docs-check -am verify -Dtest='Docs*'
 * -Dsurefire.failIfNoSpecifiedTests=false}. With {@code -Ddocs.update=true} the first test
 * rewrites the blocks from their sources instead of failing (then review the diff).
 */
class DocsTests {

  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

  private static List<Path> pages() throws IOException {
    List<Path> pages = new ArrayList<>();
    pages.add(ROOT.resolve("README.md"));
    try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
    }
    return pages;
  }

  private static String name(Path page) {
    return ROOT.relativize(page).toString();
  }

  @Test
  void everyIncludedBlockEqualsTheSourceRegionItNames() throws IOException {
    boolean update = Boolean.getBoolean("docs.update");
    List<String> problems = new ArrayList<>();
    int included = 0;
    for (Path page : pages()) {
      Markdown markdown = Markdown.read(page);
      List<String> rewritten = new ArrayList<>(markdown.lines());
      // Replace from the bottom so that earlier line numbers stay valid.
      List<Markdown.Block> blocks = markdown.blocks();
      for (int i = blocks.size() - 1; i >= 0; i--) {
        Markdown.Block block = blocks.get(i);
        if (block.include() == null) {
          continue;
        }
        included++;
        String where = name(page) + ":" + (block.fenceLine() + 1);
        Include include;
        List<String> region;
        try {
          include = Include.parse(block.include());
          region = include.region(ROOT);
        } catch (IllegalArgumentException e) {
          problems.add(where + ": " + e.getMessage());
          continue;
        }
        String compiled = Include.compiledBy(ROOT, include.path());
        if (compiled != null) {
          problems.add(where + ": " + compiled);
        }
        if (!region.equals(block.body())) {
          if (update) {
            for (int line = block.closeLine() - 1; line > block.fenceLine(); line--) {
              rewritten.remove(line);
            }
            rewritten.addAll(block.fenceLine() + 1, region);
          } else {
            problems.add(where + ": the ```" + block.language() + " block differs from " + block.include()
                + "\n    first difference: " + Include.firstDifference(block.body(), region)
                + "\n    Edit the source and the page together, or run the docs-check tests with -Ddocs.update=true"
                + " to copy the source regions into the pages.");
          }
        }
      }
      if (update && !rewritten.equals(markdown.lines())) {
        Files.writeString(page, String.join("\n", rewritten) + "\n");
      }
    }
    assertThat(included).as("included blocks in README.md and docs/").isGreaterThan(10);
    assertThat(problems).as("blocks out of step with their sources").isEmpty();
  }

  @Test
  void everyJavaAndXmlBlockIsIncludedFromASource() throws IOException {
    List<String> problems = new ArrayList<>();
    for (Path page : pages()) {
      for (Markdown.Block block : Markdown.read(page).blocks()) {
        boolean mustInclude = block.language().equals("java") || block.language().equals("xml");
        if (mustInclude && block.include() == null) {
          problems.add(name(page) + ":" + (block.fenceLine() + 1) + ": a ```" + block.language()
              + " block without an include marker. Put its code in a source file the build compiles (for example"
              + " docs-check/src/main/java/dev/idem/docs/), between // tag::NAME[] and // end::NAME[], and write"
              + " <!-- include: PATH#NAME --> on the line before the block.");
        }
      }
    }
    assertThat(problems).isEmpty();
  }

  @Test
  void everyRelativeLinkAndAnchorResolves() throws IOException {
    List<String> problems = new ArrayList<>();
    for (Path page : pages()) {
      Markdown markdown = Markdown.read(page);
      for (Markdown.Link link : markdown.links()) {
        String target = link.target();
        if (target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
          continue; // http:, https:, mailto:
        }
        String where = name(page) + ":" + (link.line() + 1) + ": (" + target + ")";
        int hash = target.indexOf('#');
        String file = hash < 0 ? target : target.substring(0, hash);
        String anchor = hash < 0 ? null : target.substring(hash + 1);
        Path resolved = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
        if (!resolved.startsWith(ROOT) || !Files.exists(resolved)) {
          problems.add(where + ": no file " + (resolved.startsWith(ROOT) ? ROOT.relativize(resolved) : resolved));
          continue;
        }
        if (anchor != null) {
          if (!resolved.toString().endsWith(".md")) {
            problems.add(where + ": an anchor into a file that is not Markdown");
          } else if (!Markdown.read(resolved).anchors().contains(anchor)) {
            problems.add(where + ": no heading with the anchor #" + anchor + " in " + ROOT.relativize(resolved)
                + " (anchors there: " + Markdown.read(resolved).anchors() + ")");
          }
        }
      }
    }
    assertThat(problems).isEmpty();
  }

  @Test
  void everyDocsPageIsLinkedFromTheReadme() throws IOException {
    Markdown readme = Markdown.read(ROOT.resolve("README.md"));
    List<String> linked = readme.links().stream().map(l -> l.target().replaceFirst("#.*", "")).toList();
    List<String> missing = new ArrayList<>();
    for (Path page : pages()) {
      String relative = name(page);
      if (!relative.equals("README.md") && !linked.contains(relative)) {
        missing.add(relative);
      }
    }
    assertThat(missing).as("docs pages the README's map does not link").isEmpty();
  }

  @Test
  void anchorsFollowGitHubsSlugRules() {
    assertThat(Markdown.slug("Graceful shutdown, metadata and tracing")).isEqualTo("graceful-shutdown-metadata-and-tracing");
    assertThat(Markdown.slug("Kafka (`idem-kafka`, on kafka-clients 3.9.x and 4.x)"))
        .isEqualTo("kafka-idem-kafka-on-kafka-clients-39x-and-4x");
    assertThat(Markdown.slug("The per-message path and the batching_default"))
        .isEqualTo("the-per-message-path-and-the-batching_default");
    assertThat(Markdown.slug("What you will have")).isEqualTo("what-you-will-have");
  }

  @Test
  void aRegionIsTheLinesBetweenItsTagsWithoutNestedTagsAndWithoutCommonIndentation() {
    List<String> source = List.of(
        "class X {",
        "  void m() {",
        "    // tag::outer[]",
        "    a();",
        "    // tag::inner[]",
        "      b();",
        "    // end::inner[]",
        "    // end::outer[]",
        "  }",
        "}");
    assertThat(Include.region(source, "outer", "X.java")).containsExactly("a();", "  b();");
    assertThat(Include.region(source, "inner", "X.java")).containsExactly("b();");
  }

  @Test
  void aRegionLeavesOutTheBlankLinesAtItsEnds() {
    List<String> source = List.of("// tag::imports[]", "", "import a.B;", "", "import c.D;", "", "// end::imports[]");
    assertThat(Include.region(source, "imports", "X.java")).containsExactly("import a.B;", "", "import c.D;");
  }

  @Test
  void blocksAndTheirIncludeMarkersAreRead() {
    Markdown markdown = new Markdown(List.of(
        "# Title",
        "<!-- include: a/B.java#x -->",
        "```java",
        "code();",
        "```",
        "",
        "```yaml",
        "a: 1",
        "```",
        "[link](other.md#title) and `[not](a-link)`"));
    assertThat(markdown.blocks()).hasSize(2);
    assertThat(markdown.blocks().get(0).include()).isEqualTo("a/B.java#x");
    assertThat(markdown.blocks().get(0).body()).containsExactly("code();");
    assertThat(markdown.blocks().get(1).include()).isNull();
    assertThat(markdown.links()).extracting(Markdown.Link::target).containsExactly("other.md#title");
    assertThat(markdown.anchors()).containsExactly("title");
  }

  /** A Markdown page: its code blocks, links and heading anchors. */
  record Markdown(List<String> lines) {

    private static final Pattern INCLUDE = Pattern.compile("^<!--\\s*include:\\s*(\\S+)\\s*-->\\s*$");
    private static final Pattern FENCE = Pattern.compile("^```\\s*([A-Za-z0-9_+-]*)\\s*$");
    private static final Pattern LINK = Pattern.compile("\\[[^\\]]*\\]\\(([^)\\s]+)\\)");
    private static final Pattern HEADING = Pattern.compile("^#{1,6}\\s+(.*?)\\s*#*\\s*$");

    static Markdown read(Path page) throws IOException {
      return new Markdown(Files.readAllLines(page));
    }

    /** A fenced code block. */
    record Block(int fenceLine, int closeLine, String language, String include, List<String> body) {}

    /** A link and the line it is on. */
    record Link(int line, String target) {}

    List<Block> blocks() {
      List<Block> blocks = new ArrayList<>();
      for (int i = 0; i < lines.size(); i++) {
        Matcher open = FENCE.matcher(lines.get(i));
        if (!open.matches()) {
          continue;
        }
        int close = i + 1;
        while (close < lines.size() && !lines.get(close).strip().equals("```")) {
          close++;
        }
        if (close == lines.size()) {
          throw new IllegalArgumentException("a code block opened on line " + (i + 1) + " is never closed");
        }
        Matcher include = i > 0 ? INCLUDE.matcher(lines.get(i - 1)) : null;
        blocks.add(new Block(i, close, open.group(1), include != null && include.matches() ? include.group(1) : null,
            List.copyOf(lines.subList(i + 1, close))));
        i = close;
      }
      return blocks;
    }

    /** The lines outside code blocks, others blanked, so that line numbers stay. */
    private List<String> prose() {
      List<String> prose = new ArrayList<>(lines);
      for (Block block : blocks()) {
        for (int i = block.fenceLine(); i <= block.closeLine(); i++) {
          prose.set(i, "");
        }
      }
      return prose;
    }

    List<Link> links() {
      List<Link> links = new ArrayList<>();
      List<String> prose = prose();
      for (int i = 0; i < prose.size(); i++) {
        String line = prose.get(i).replaceAll("`[^`]*`", "");
        Matcher m = LINK.matcher(line);
        while (m.find()) {
          links.add(new Link(i, m.group(1)));
        }
      }
      return links;
    }

    List<String> anchors() {
      List<String> anchors = new ArrayList<>();
      for (String line : prose()) {
        Matcher m = HEADING.matcher(line);
        if (m.matches()) {
          String slug = slug(m.group(1));
          String unique = slug;
          for (int n = 1; anchors.contains(unique); n++) {
            unique = slug + "-" + n;
          }
          anchors.add(unique);
        }
      }
      return anchors;
    }

    /** GitHub's heading anchor: lower case, punctuation but - and _ dropped, spaces to -. */
    static String slug(String heading) {
      String text = heading.replaceAll("\\[([^\\]]*)\\]\\([^)]*\\)", "$1"); // a link in a heading keeps its text
      return text.toLowerCase(java.util.Locale.ROOT)
          .replaceAll("[^\\p{L}\\p{N}\\s_-]", "")
          .replace(' ', '-');
    }
  }

  /** An include marker's target: a file and, after {@code #}, a tagged region of it. */
  record Include(String path, String tag) {

    static Include parse(String marker) {
      int hash = marker.indexOf('#');
      return hash < 0 ? new Include(marker, null) : new Include(marker.substring(0, hash), marker.substring(hash + 1));
    }

    List<String> region(Path root) {
      Path file = root.resolve(path).normalize();
      if (!file.startsWith(root) || !Files.isRegularFile(file)) {
        throw new IllegalArgumentException("the include marker names " + path + ", which is not a file of the repository");
      }
      List<String> lines;
      try {
        lines = Files.readAllLines(file);
      } catch (IOException e) {
        throw new IllegalArgumentException("cannot read " + path + ": " + e);
      }
      if (tag == null) {
        return lines.stream().filter(line -> !isMarker(line)).toList();
      }
      return region(lines, tag, path);
    }

    static List<String> region(List<String> lines, String tag, String path) {
      int start = -1;
      int end = -1;
      for (int i = 0; i < lines.size(); i++) {
        if (lines.get(i).contains("tag::" + tag + "[]")) {
          if (start >= 0) {
            throw new IllegalArgumentException(path + " has the tag " + tag + " twice");
          }
          start = i;
        } else if (lines.get(i).contains("end::" + tag + "[]") && start >= 0 && end < 0) {
          end = i;
        }
      }
      if (start < 0 || end < 0) {
        throw new IllegalArgumentException(path + " has no region tag::" + tag + "[] ... end::" + tag + "[]");
      }
      List<String> region = lines.subList(start + 1, end).stream().filter(line -> !isMarker(line)).toList();
      int indent = region.stream().filter(line -> !line.isBlank())
          .mapToInt(line -> line.length() - line.stripLeading().length()).min().orElse(0);
      List<String> dedented = region.stream().map(line -> line.isBlank() ? "" : line.substring(indent)).toList();
      // Blank lines at either end are the source's spacing (the formatter's, after imports), not the block's.
      int first = 0;
      int last = dedented.size();
      while (first < last && dedented.get(first).isEmpty()) {
        first++;
      }
      while (last > first && dedented.get(last - 1).isEmpty()) {
        last--;
      }
      return dedented.subList(first, last);
    }

    private static boolean isMarker(String line) {
      return line.contains("tag::") && line.contains("[]") || line.contains("end::") && line.contains("[]");
    }

    /**
     * Says why the build would not compile (or build) the file, or {@code null} when it does: a
     * Java file must sit under {@code src/main/java} or {@code src/test/java} of a module of the
     * root pom or of a project that {@code .ci/run} builds on its own ({@code mvn ... -f
     * DIR/pom.xml verify}, an application outside the reactor that imports the installed Idem), a
     * {@code pom.xml} must be one of theirs; other files (YAML, SQL) are resources read by tests
     * and are only compared.
     */
    static String compiledBy(Path root, String path) {
      List<String> modules = new ArrayList<>();
      try {
        Matcher m = Pattern.compile("<module>([^<]+)</module>").matcher(Files.readString(root.resolve("pom.xml")));
        while (m.find()) {
          modules.add(m.group(1));
        }
        Matcher ci = Pattern.compile("(?m)^\\s*mvn [^\\n#]*-f (\\S+)/pom\\.xml [^\\n#]*verify")
            .matcher(Files.readString(root.resolve(".ci/run")));
        while (ci.find()) {
          modules.add(ci.group(1));
        }
      } catch (IOException e) {
        return "cannot read the root pom or .ci/run: " + e;
      }
      if (path.endsWith(".java")) {
        boolean inModule = modules.stream()
            .anyMatch(module -> path.startsWith(module + "/src/main/java/") || path.startsWith(module + "/src/test/java/"));
        return inModule ? null : path + " is not compiled by the build: put it under src/main/java or src/test/java of a module";
      }
      if (path.endsWith("pom.xml")) {
        String module = path.equals("pom.xml") ? "" : path.substring(0, path.length() - "/pom.xml".length());
        return module.isEmpty() || modules.contains(module) ? null : path + " is not the pom of a module the build builds";
      }
      return null;
    }

    static String firstDifference(List<String> page, List<String> source) {
      for (int i = 0; i < Math.max(page.size(), source.size()); i++) {
        String a = i < page.size() ? page.get(i) : "<no line>";
        String b = i < source.size() ? source.get(i) : "<no line>";
        if (!a.equals(b)) {
          return "line " + (i + 1) + " of the block\n      page:   " + a + "\n      source: " + b;
        }
      }
      return "none";
    }
  }
}
