package dev.idem.kafka.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The broker process's class-path file: found through the system property, explained when missing. */
class EmbeddedKafkaBrokerTests {

  private String saved;

  @BeforeEach
  void save() {
    saved = System.getProperty(EmbeddedKafkaBroker.CLASSPATH_PROPERTY);
  }

  @AfterEach
  void restore() {
    if (saved == null) {
      System.clearProperty(EmbeddedKafkaBroker.CLASSPATH_PROPERTY);
    } else {
      System.setProperty(EmbeddedKafkaBroker.CLASSPATH_PROPERTY, saved);
    }
  }

  @Test
  void aMissingClassPathFileFailsWithHowToBuildIt(@TempDir Path dir) {
    Path missing = dir.resolve("broker-classpath.txt");
    System.setProperty(EmbeddedKafkaBroker.CLASSPATH_PROPERTY, missing.toString());
    assertThatThrownBy(EmbeddedKafkaBroker::brokerClassPath)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(missing.toString())
        .hasMessageContaining("mvn -pl test-kafka-broker compile")
        .hasMessageContaining(KafkaService.BOOTSTRAP_ENV);
  }

  @Test
  void aClassPathNamingMissingFilesFailsWithWhichOnes(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("broker-classpath.txt");
    Path gone = dir.resolve("gone.jar");
    Files.writeString(file, dir + File.pathSeparator + gone + "\n");
    System.setProperty(EmbeddedKafkaBroker.CLASSPATH_PROPERTY, file.toString());
    assertThatThrownBy(EmbeddedKafkaBroker::brokerClassPath)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(gone.toString());
  }

  @Test
  void theBuildsClassPathFileNamesTheBrokersMainClassAndKafkasJars() {
    String classPath = EmbeddedKafkaBroker.brokerClassPath();
    assertThat(classPath.split(File.pathSeparator))
        .anyMatch(entry -> entry.replace('\\', '/').endsWith("test-kafka-broker/target/classes"))
        .anyMatch(entry -> entry.contains("kafka_2.13-"));
  }
}
