package dev.idem.examples;

import dev.idem.kafka.testing.KafkaService;
import dev.idem.testing.Ports;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.URI;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * Where the examples find PostgreSQL, Kafka and RabbitMQ.
 *
 * <p>Each service comes from a command-line flag, else an environment variable, else an
 * embedded default, so that the demo runs on a machine with only a JDK and Maven:
 *
 * <table>
 *   <caption>Services</caption>
 *   <tr><th>service</th><th>flag</th><th>environment</th><th>default</th></tr>
 *   <tr><td>PostgreSQL</td><td>{@code --postgres=r2dbc:postgresql://user:pw@host:5432/db}</td>
 *       <td>{@value #POSTGRES_ENV}</td><td>embedded PostgreSQL (zonky binaries from Maven Central)</td></tr>
 *   <tr><td>Kafka</td><td>{@code --kafka=host:9092}</td><td>{@value #KAFKA_ENV}</td>
 *       <td>a broker on 127.0.0.1:9092, else a KRaft broker from Kafka's jars in a child JVM</td></tr>
 *   <tr><td>RabbitMQ</td><td>{@code --rabbit=amqp://guest:guest@host:5672}</td><td>{@value #RABBIT_ENV}</td>
 *       <td>a server on 127.0.0.1:5672; there is no embedded RabbitMQ, so the RabbitMQ example
 *       stops with instructions when none is reachable</td></tr>
 * </table>
 *
 * Embedded servers stop when the JVM exits.
 */
public final class DemoEnvironment {

  /** Environment variable with an R2DBC URL of PostgreSQL. */
  public static final String POSTGRES_ENV = "IDEM_POSTGRES_URL";
  /** Environment variable with Kafka bootstrap servers. */
  public static final String KAFKA_ENV = "IDEM_KAFKA_BOOTSTRAP";
  /** Environment variable with an AMQP URI of RabbitMQ. */
  public static final String RABBIT_ENV = "IDEM_RABBIT_URI";

  private final Map<String, String> flags;
  private EmbeddedPostgres embeddedPostgres;

  private DemoEnvironment(Map<String, String> flags) {
    this.flags = flags;
  }

  /**
   * Reads {@code --name=value} flags; other arguments are ignored.
   *
   * @param args the command line
   * @return the environment
   */
  public static DemoEnvironment fromArgs(String... args) {
    Map<String, String> flags = new HashMap<>();
    for (String arg : args) {
      if (arg.startsWith("--") && arg.contains("=")) {
        flags.put(arg.substring(2, arg.indexOf('=')), arg.substring(arg.indexOf('=') + 1));
      }
    }
    return new DemoEnvironment(flags);
  }

  /**
   * A flag's value.
   *
   * @param name the flag without dashes
   * @param fallback the value when the flag is absent
   * @return the value
   */
  public String flag(String name, String fallback) {
    return flags.getOrDefault(name, fallback);
  }

  /**
   * An integer flag.
   *
   * @param name the flag without dashes
   * @param fallback the value when the flag is absent
   * @return the value
   */
  public int intFlag(String name, int fallback) {
    String value = flags.get(name);
    try {
      return value == null ? fallback : Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + name + " must be a number, was: " + value, e);
    }
  }

  /**
   * The R2DBC URL of PostgreSQL, starting an embedded server when none is configured.
   *
   * @return the URL
   */
  public synchronized String postgresUrl() {
    String configured = configured("postgres", POSTGRES_ENV);
    if (configured != null) {
      return configured;
    }
    if (embeddedPostgres == null) {
      System.out.println("[env] no PostgreSQL configured (--postgres or " + POSTGRES_ENV + "): starting an embedded one");
      EmbeddedPostgres started = startEmbedded(() -> EmbeddedPostgres.builder().start());
      embeddedPostgres = started;
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          started.close();
        } catch (IOException e) {
          // the JVM is exiting anyway
        }
      }));
    }
    return "r2dbc:postgresql://postgres@localhost:" + embeddedPostgres.getPort() + "/postgres";
  }

  /**
   * Starts the embedded PostgreSQL, turning any failure into one that tells the user what to do
   * instead. Not only I/O errors: a broken classpath surfaces here as a {@link LinkageError} such
   * as {@link NoSuchMethodError}, which exec:java would otherwise misreport as a missing main
   * method. Only {@link VirtualMachineError}s pass through unchanged.
   *
   * @param start starts the server
   * @param <T> the server type
   * @return the started server
   * @throws IllegalStateException with the {@code --postgres=...} hint, caused by the failure
   */
  static <T> T startEmbedded(Callable<T> start) {
    try {
      return start.call();
    } catch (VirtualMachineError e) {
      throw e;
    } catch (Exception | Error e) {
      throw new IllegalStateException("Could not start the embedded PostgreSQL (" + e
          + "); pass --postgres=r2dbc:postgresql://user:password@host:5432/db (or set " + POSTGRES_ENV
          + ") instead", e);
    }
  }

  /**
   * Kafka bootstrap servers, starting a broker in a child JVM when none is configured or listening.
   *
   * @return the bootstrap servers
   */
  public String kafkaBootstrap() {
    String configured = configured("kafka", KAFKA_ENV);
    if (configured != null) {
      return configured;
    }
    System.out.println(
        "[env] no Kafka configured (--kafka or " + KAFKA_ENV + "): using 127.0.0.1:9092 or a KRaft broker in a child JVM");
    return KafkaService.get().bootstrapServers();
  }

  /**
   * The AMQP URI of RabbitMQ.
   *
   * @return the URI
   * @throws IllegalStateException with instructions when no RabbitMQ is configured or listening
   */
  public String rabbitUri() {
    String configured = configured("rabbit", RABBIT_ENV);
    if (configured != null) {
      return configured;
    }
    if (Ports.listening("127.0.0.1", 5672)) {
      return "amqp://guest:guest@127.0.0.1:5672";
    }
    throw new IllegalStateException("This example needs RabbitMQ and none is reachable. Start one "
        + "(e.g. 'rabbitmq-server -detached', or 'docker run -p 5672:5672 rabbitmq:4') or pass "
        + "--rabbit=amqp://user:password@host:5672 (or set " + RABBIT_ENV + ").");
  }

  private String configured(String flag, String env) {
    String value = flags.get(flag);
    if (value == null || value.isBlank()) {
      value = System.getenv(env);
    }
    return value == null || value.isBlank() ? null : value;
  }

  /**
   * The host and port of an AMQP URI, for messages.
   *
   * @param uri the URI
   * @return {@code host:port}
   */
  public static String hostAndPort(String uri) {
    URI parsed = URI.create(uri);
    return parsed.getHost() + ":" + parsed.getPort();
  }
}
