package dev.idem.spring;

import java.lang.reflect.Method;

/**
 * Checks that the kafka-clients on the class path is a 3.x release, the only line Reactor Kafka
 * 1.3.25 (under {@code idem-kafka}) works with: its {@code ReceiverRecord} calls a
 * {@code ConsumerRecord} constructor that kafka-clients 4.0 removed (reactor-kafka#420), so with
 * 4.x every record fails at run time. Spring Boot 4 manages kafka-clients 4.x, so a Boot
 * application must pin 3.9.1; the starter runs this check when it starts a Kafka consumer and
 * fails with {@link #FIX} instead of letting records fail one by one.
 */
public final class KafkaClientsVersion {

  /** How to fix a wrong version, as the error message says it. */
  public static final String FIX = "With spring-boot-starter-parent as the parent, set <kafka.version>3.9.1</kafka.version> in the "
      + "pom's <properties>. When importing spring-boot-dependencies instead, import dev.idem:idem-bom before it (or manage "
      + "org.apache.kafka:kafka-clients 3.9.1 in <dependencyManagement> before it). With Gradle's dependency-management "
      + "plugin: ext['kafka.version'] = '3.9.1'.";

  private KafkaClientsVersion() {}

  /**
   * Checks a kafka-clients version string.
   *
   * @param version as {@code AppInfoParser.getVersion()} reports it, for example {@code 3.9.1}
   * @throws IllegalStateException naming the version and the fix when it is not 3.x
   */
  public static void check(String version) {
    String major = version == null ? "" : version.trim().split("[.-]", 2)[0];
    if (!major.equals("3")) {
      throw new IllegalStateException("Idem's Kafka adapter needs kafka-clients 3.x, but kafka-clients " + version
          + " is on the class path: Reactor Kafka 1.3.25 calls a ConsumerRecord constructor that kafka-clients 4.0 removed "
          + "(reactor-kafka#420), so every record would fail. Spring Boot 4 manages kafka-clients 4.x. " + FIX);
    }
  }

  /**
   * Checks the kafka-clients on the class path ({@code AppInfoParser.getVersion()}).
   *
   * @throws IllegalStateException when it is not 3.x, or kafka-clients is absent
   */
  public static void checkClassPath() {
    String version;
    try {
      Class<?> parser = Class.forName("org.apache.kafka.common.utils.AppInfoParser", false, KafkaClientsVersion.class.getClassLoader());
      Method getVersion = parser.getMethod("getVersion");
      version = (String) getVersion.invoke(null);
    } catch (ReflectiveOperationException | LinkageError e) {
      throw new IllegalStateException("A Kafka consumer is configured but kafka-clients is not usable on the class path ("
          + e + "); add dev.idem:idem-kafka. " + FIX, e);
    }
    check(version);
  }
}
