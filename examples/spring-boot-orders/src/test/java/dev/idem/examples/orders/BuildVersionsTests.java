package dev.idem.examples.orders;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.impl.ClientVersion;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.boot.SpringBootVersion;
import org.springframework.kafka.core.KafkaTemplate;

/**
 * This module's parent is spring-boot-starter-parent, so it cannot take versions from the root pom:
 * these tests keep its Boot literal in step with the root's, and show that the application runs on
 * the clients Spring Boot 4.0.x manages, with no version property: kafka-clients 4.1.x,
 * amqp-client 5.27.1, Spring Kafka 4 and Spring AMQP 4; and on neither Reactor Kafka nor Reactor
 * RabbitMQ.
 */
class BuildVersionsTests {

  private static String rootProperty(String name) throws Exception {
    String root = Files.readString(Path.of("../../pom.xml"));
    Matcher m = Pattern.compile("<" + Pattern.quote(name) + ">([^<]+)</" + Pattern.quote(name) + ">").matcher(root);
    assertThat(m.find()).as("root pom property " + name).isTrue();
    return m.group(1);
  }

  private static boolean present(String className) {
    return BuildVersionsTests.class.getClassLoader().getResource(className.replace('.', '/') + ".class") != null;
  }

  @Test
  void theSpringBootParentIsTheVersionTheRootPomNames() throws Exception {
    assertThat(SpringBootVersion.getVersion()).isEqualTo(rootProperty("spring-boot.version"));
  }

  @Test
  void theIdemVersionPropertyIsTheRootPomsVersion() throws Exception {
    String root = Files.readString(Path.of("../../pom.xml"));
    Matcher rootVersion = Pattern.compile("<artifactId>idem-parent</artifactId>\\s*<version>([^<]+)</version>").matcher(root);
    assertThat(rootVersion.find()).as("the root pom's version").isTrue();
    Matcher own = Pattern.compile("<idem.version>([^<]+)</idem.version>").matcher(Files.readString(Path.of("pom.xml")));
    assertThat(own.find()).as("this pom's idem.version property").isTrue();
    assertThat(own.group(1)).isEqualTo(rootVersion.group(1));
  }

  @Test
  void theBrokerClientsAreTheOnesSpringBootManages() {
    assertThat(AppInfoParser.getVersion()).startsWith("4.1.");
    assertThat(ClientVersion.VERSION).isEqualTo("5.27.1");
    assertThat(KafkaTemplate.class.getPackage().getImplementationVersion()).startsWith("4.");
    assertThat(RabbitTemplate.class.getPackage().getImplementationVersion()).startsWith("4.");
  }

  @Test
  void neitherReactorKafkaNorReactorRabbitmqIsOnTheClassPath() {
    assertThat(present("reactor.kafka.receiver.KafkaReceiver")).isFalse();
    assertThat(present("reactor.rabbitmq.Sender")).isFalse();
  }
}
