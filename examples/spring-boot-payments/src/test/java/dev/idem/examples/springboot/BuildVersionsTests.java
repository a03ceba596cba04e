package dev.idem.examples.springboot;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootVersion;

/**
 * This module's parent is spring-boot-starter-parent, so it cannot take versions from the root pom:
 * these tests keep its literals in step with the root's, and show that the application runs on the
 * kafka-clients Spring Boot manages (4.1.x for Boot 4.0.x), with no version property, and without
 * Reactor Kafka.
 */
class BuildVersionsTests {

  private static String rootProperty(String name) throws Exception {
    String root = Files.readString(Path.of("../../pom.xml"));
    Matcher m = Pattern.compile("<" + Pattern.quote(name) + ">([^<]+)</" + Pattern.quote(name) + ">").matcher(root);
    assertThat(m.find()).as("root pom property " + name).isTrue();
    return m.group(1);
  }

  @Test
  void theSpringBootParentIsTheVersionTheRootPomNames() throws Exception {
    assertThat(SpringBootVersion.getVersion()).isEqualTo(rootProperty("spring-boot.version"));
  }

  @Test
  void kafkaClientsIsTheVersionSpringBootManagesAndReactorKafkaIsAbsent() {
    assertThat(AppInfoParser.getVersion()).startsWith("4.1.");
    assertThat(getClass().getClassLoader().getResource("reactor/kafka/receiver/KafkaReceiver.class")).isNull();
  }
}
