package dev.idem.kafka.testing;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * A single-node Kafka broker in KRaft combined mode (broker and controller in one server) from
 * Kafka's own jars, run in a separate JVM process that this class launches: the main class of the
 * {@code idem-test-kafka-broker} module, on the class path that module's build writes to
 * {@code test-kafka-broker/target/broker-classpath.txt}. The broker's Kafka version is the root
 * pom's {@code kafka-broker.version} (4.x, which serves 3.9 and 4.x clients), independent of the
 * kafka-clients on this JVM's class path, so tests can run on any client version.
 *
 * <p>The class-path file is found through the system property {@value #CLASSPATH_PROPERTY} (the
 * Maven builds of the modules that launch the broker set it), else by looking for
 * {@code test-kafka-broker/target/broker-classpath.txt} in the working directory and its parents.
 *
 * <p>It listens on free loopback ports and can be stopped and started again on the same ports and
 * data. Its data directory also holds its log, {@code broker.log}. The process ends when this JVM
 * exits: a shutdown hook stops it (forcibly when it does not stop in time), and the process itself
 * exits when its standard input, a pipe from this JVM, closes, as happens when this JVM is killed.
 */
public final class EmbeddedKafkaBroker {

  /** System property naming the file with the broker process's class path. */
  public static final String CLASSPATH_PROPERTY = "idem.test.kafka.broker.classpath";
  /** Where the broker module's build writes the class-path file, relative to the repository root. */
  public static final String CLASSPATH_FILE = "test-kafka-broker/target/broker-classpath.txt";

  private static final String MAIN_CLASS = "dev.idem.testing.kafkabroker.KafkaBrokerMain";
  private static final String READY = "IDEM-KAFKA-BROKER READY";
  private static final Duration START_TIMEOUT = Duration.ofSeconds(120);
  private static final Duration STOP_TIMEOUT = Duration.ofSeconds(60);

  private final Path dataDir;
  private final int port;
  private final int controllerPort;
  private final List<String> jvmOptions;
  private final List<String> brokerConfigs;
  private Process process;
  private volatile String version;
  private boolean destroyed;

  /**
   * A new broker with its own data directory and ports, not started. Most tests share the one
   * {@link KafkaService#get()} provides; a test that stops its broker uses its own.
   *
   * @return the broker; call {@link #start()}, and {@link #destroy()} when done
   */
  public static EmbeddedKafkaBroker create() {
    return new EmbeddedKafkaBroker(List.of(), List.of());
  }

  /**
   * A new broker with JVM options for its process and broker configs of its own, not started.
   *
   * @param jvmOptions options of the broker's JVM, such as {@code -Xmx1g}; replace the default heap
   *     settings when they name one
   * @param brokerConfigs {@code name=value} broker configs that override or add to the defaults
   * @return the broker; call {@link #start()}, and {@link #destroy()} when done
   */
  public static EmbeddedKafkaBroker create(List<String> jvmOptions, List<String> brokerConfigs) {
    return new EmbeddedKafkaBroker(jvmOptions, brokerConfigs);
  }

  EmbeddedKafkaBroker(List<String> jvmOptions, List<String> brokerConfigs) {
    this.jvmOptions = List.copyOf(jvmOptions);
    this.brokerConfigs = List.copyOf(brokerConfigs);
    try {
      this.dataDir = Files.createTempDirectory("idem-kafka-");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    this.port = freePort();
    this.controllerPort = freePort();
    Runtime.getRuntime().addShutdownHook(new Thread(this::destroy, "idem-kafka-broker-stop-" + port));
  }

  /**
   * Starts the broker process; blocks until it accepts connections and answers an admin client.
   *
   * @throws IllegalStateException when the class-path file is missing, or the broker does not
   *     start in time (the message holds the end of its log)
   */
  public synchronized void start() {
    if (destroyed) {
      throw new IllegalStateException("the broker at " + bootstrapServers() + " was destroyed");
    }
    if (process != null && process.isAlive()) {
      return;
    }
    String classPath = brokerClassPath();
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    if (jvmOptions.stream().noneMatch(o -> o.startsWith("-Xmx"))) {
      command.add("-Xmx1g");
    }
    command.addAll(jvmOptions);
    command.add("-cp");
    command.add(classPath);
    command.add(MAIN_CLASS);
    command.add(dataDir.toString());
    command.add(Integer.toString(port));
    command.add(Integer.toString(controllerPort));
    command.addAll(brokerConfigs);
    Path log = log();
    Process p;
    try {
      p = new ProcessBuilder(command).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new IllegalStateException("Could not launch the Kafka broker process: " + command, e);
    }
    process = p;
    CountDownLatch ready = new CountDownLatch(1);
    Thread pump = new Thread(() -> pump(p, log, ready), "idem-kafka-broker-log-" + port);
    pump.setDaemon(true);
    pump.start();
    try {
      awaitReady(p, ready);
    } catch (RuntimeException e) {
      kill(p);
      process = null;
      throw e;
    }
  }

  /** Copies the process's output to its log file and counts down {@code ready} at the readiness line. */
  private void pump(Process p, Path log, CountDownLatch ready) {
    try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        BufferedWriter out = Files.newBufferedWriter(log, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
            StandardOpenOption.APPEND)) {
      String line;
      while ((line = in.readLine()) != null) {
        out.write(line);
        out.newLine();
        out.flush();
        if (line.startsWith(READY)) {
          int at = line.indexOf("version=");
          version = at < 0 ? null : line.substring(at + "version=".length()).trim();
          ready.countDown();
        }
      }
    } catch (IOException e) {
      // the process ended or the data directory was deleted: nothing more to copy
    }
  }

  private void awaitReady(Process p, CountDownLatch ready) {
    long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
    try {
      while (!ready.await(100, TimeUnit.MILLISECONDS)) {
        if (!p.isAlive()) {
          throw new IllegalStateException("The Kafka broker process exited with code " + p.exitValue()
              + " before it was ready. The end of its log " + log() + ":\n" + logTail());
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("The Kafka broker process was not ready within " + START_TIMEOUT
              + ". The end of its log " + log() + ":\n" + logTail());
        }
      }
      while (!accepts()) {
        if (!p.isAlive() || System.nanoTime() > deadline) {
          throw new IllegalStateException("The Kafka broker process does not accept connections on "
              + bootstrapServers() + ". The end of its log " + log() + ":\n" + logTail());
        }
        Thread.sleep(100);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while the Kafka broker started", e);
    }
    Exception last = null;
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers()))) {
      while (System.nanoTime() < deadline && p.isAlive()) {
        try {
          if (!admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).isEmpty()) {
            return;
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("Interrupted while the Kafka broker started", e);
        } catch (Exception e) {
          last = e;
        }
      }
    }
    throw new IllegalStateException("The Kafka broker process at " + bootstrapServers()
        + " does not answer describeCluster. The end of its log " + log() + ":\n" + logTail(), last);
  }

  private boolean accepts() {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1_000);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * Stops the broker (a controlled shutdown; forcibly after 60 s), keeping its data for a later
   * {@link #start()} on the same ports.
   */
  public synchronized void stop() {
    Process p = process;
    process = null;
    if (p == null) {
      return;
    }
    p.destroy();
    try {
      if (!p.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        kill(p);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      kill(p);
    }
  }

  private static void kill(Process p) {
    p.destroyForcibly();
    try {
      p.waitFor(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Stops the broker and deletes its data; it cannot be started again. */
  public void destroy() {
    synchronized (this) {
      if (destroyed) {
        return;
      }
      destroyed = true;
    }
    stop();
    try (Stream<Path> paths = Files.walk(dataDir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      // best effort: a temp directory
    }
  }

  /**
   * The bootstrap servers.
   *
   * @return {@code 127.0.0.1:<port>}
   */
  public String bootstrapServers() {
    return "127.0.0.1:" + port;
  }

  /**
   * The broker's Kafka version, as it reported once started.
   *
   * @return the version, such as {@code 4.1.2}, or {@code null} before the first start
   */
  public String version() {
    return version;
  }

  /**
   * The process of the running broker.
   *
   * @return its process id, or {@code -1} when it is not running
   */
  public synchronized long pid() {
    return process == null ? -1 : process.pid();
  }

  /**
   * The broker's log file (its standard output and error, over all its starts).
   *
   * @return the file in the broker's data directory
   */
  public Path log() {
    return dataDir.resolve("broker.log");
  }

  private String logTail() {
    try {
      List<String> lines = Files.readAllLines(log(), StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  /**
   * The broker process's class path, from the file that the {@code test-kafka-broker} module's build
   * writes.
   *
   * @return the class path
   * @throws IllegalStateException saying how to build the file when it is missing
   */
  static String brokerClassPath() {
    Path file = classPathFile();
    if (file == null || !Files.isRegularFile(file)) {
      throw new IllegalStateException("The Kafka broker process's class-path file "
          + (file == null ? CLASSPATH_FILE + " (looked for in " + Path.of("").toAbsolutePath() + " and its parents)" : file)
          + " does not exist. Build it from the repository root with 'mvn -pl test-kafka-broker compile' (any build "
          + "that includes that module does, e.g. 'mvn -pl kafka-adapter -am verify'), or point the system property "
          + CLASSPATH_PROPERTY + " at it; or give the tests a broker of your own with the environment variable "
          + KafkaService.BOOTSTRAP_ENV + ".");
    }
    String classPath;
    try {
      classPath = Files.readString(file, StandardCharsets.UTF_8).trim();
    } catch (IOException e) {
      throw new UncheckedIOException("Could not read " + file, e);
    }
    List<String> missing = Arrays.stream(classPath.split(File.pathSeparator))
        .filter(entry -> !entry.isBlank() && !Files.exists(Path.of(entry))).toList();
    if (classPath.isEmpty() || !missing.isEmpty()) {
      throw new IllegalStateException("The Kafka broker process's class path in " + file + " names missing files "
          + missing + ". Rebuild it from the repository root with 'mvn -pl test-kafka-broker compile'.");
    }
    return classPath;
  }

  private static Path classPathFile() {
    String configured = System.getProperty(CLASSPATH_PROPERTY);
    if (configured != null && !configured.isBlank()) {
      return Path.of(configured).toAbsolutePath().normalize();
    }
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path candidate = dir.resolve(CLASSPATH_FILE);
      if (Files.isRegularFile(candidate)) {
        return candidate;
      }
    }
    return null;
  }

  private static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      socket.setReuseAddress(true);
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
