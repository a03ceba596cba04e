package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The application {@code examples/getting-started-app} is built outside the reactor, as a user's
 * (it cannot inherit the root pom's versions): each version literal of its pom must be the one the
 * root pom names, so that the versions of the build still live in one place.
 */
class GettingStartedAppPomTests {

  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();

  private static String rootProperty(String root, String name) {
    Matcher m = Pattern.compile("<" + Pattern.quote(name) + ">([^<]+)</" + Pattern.quote(name) + ">").matcher(root);
    assertThat(m.find()).as("the root pom's property %s", name).isTrue();
    return m.group(1);
  }

  private static String versionOf(String pom, String artifactId) {
    Matcher m = Pattern.compile("<artifactId>" + Pattern.quote(artifactId) + "</artifactId>\\s*<version>([^<]+)</version>")
        .matcher(pom);
    assertThat(m.find()).as("a version for %s in examples/getting-started-app/pom.xml", artifactId).isTrue();
    return m.group(1);
  }

  @Test
  void itsVersionLiteralsAreTheRootPoms() throws IOException {
    String root = Files.readString(ROOT.resolve("pom.xml"));
    String app = Files.readString(ROOT.resolve("examples/getting-started-app/pom.xml"));
    Matcher idem = Pattern.compile("<idem.version>([^<]+)</idem.version>").matcher(app);
    assertThat(idem.find()).as("the app's idem.version").isTrue();
    Matcher rootVersion = Pattern.compile("<artifactId>idem-parent</artifactId>\\s*<version>([^<]+)</version>").matcher(root);
    assertThat(rootVersion.find()).isTrue();
    assertThat(idem.group(1)).as("idem.version").isEqualTo(rootVersion.group(1));
    assertThat(versionOf(app, "logback-classic")).isEqualTo(rootProperty(root, "logback.version"));
    assertThat(versionOf(app, "junit-jupiter")).isEqualTo(rootProperty(root, "junit-bom.version"));
    assertThat(versionOf(app, "assertj-core")).isEqualTo(rootProperty(root, "assertj.version"));
    assertThat(versionOf(app, "maven-compiler-plugin")).isEqualTo(rootProperty(root, "compiler-plugin.version"));
    assertThat(versionOf(app, "maven-surefire-plugin")).isEqualTo(rootProperty(root, "surefire.version"));
  }
}
