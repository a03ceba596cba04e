package dev.idem.kafka.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.stream.Stream;
import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.storage.Formatter;
import org.apache.kafka.server.common.MetadataVersion;

/**
 * A single-node Kafka 3.9 broker in KRaft combined mode (broker and controller in one server),
 * running in this JVM from the {@code kafka_2.13} jars on the test class path. Its log directory
 * is formatted like {@code kafka-storage.sh format} does; it listens on free loopback ports and
 * can be stopped and started again on the same ports and data.
 */
public final class EmbeddedKafkaBroker {

  private final Path dataDir;
  private final int port;
  private final int controllerPort;
  private volatile KafkaRaftServer server;

  /**
   * A new broker with its own data directory and ports, formatted but not started. Most tests
   * share the one {@link KafkaService#get()} provides; a test that stops its broker uses its own.
   *
   * @return the broker; call {@link #start()}, and {@link #destroy()} when done
   */
  public static EmbeddedKafkaBroker create() {
    return new EmbeddedKafkaBroker();
  }

  EmbeddedKafkaBroker() {
    try {
      this.dataDir = Files.createTempDirectory("idem-kafka-");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    this.port = freePort();
    this.controllerPort = freePort();
    format();
  }

  private Properties config() {
    Properties p = new Properties();
    p.put("process.roles", "broker,controller");
    p.put("node.id", "1");
    p.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
    p.put("listeners", "PLAINTEXT://127.0.0.1:" + port + ",CONTROLLER://127.0.0.1:" + controllerPort);
    p.put("advertised.listeners", "PLAINTEXT://127.0.0.1:" + port);
    p.put("controller.listener.names", "CONTROLLER");
    p.put("inter.broker.listener.name", "PLAINTEXT");
    p.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
    p.put("log.dirs", dataDir.toString());
    p.put("num.partitions", "1");
    p.put("auto.create.topics.enable", "true");
    p.put("offsets.topic.replication.factor", "1");
    p.put("offsets.topic.num.partitions", "4");
    p.put("transaction.state.log.replication.factor", "1");
    p.put("transaction.state.log.min.isr", "1");
    p.put("transaction.state.log.num.partitions", "4");
    p.put("group.initial.rebalance.delay.ms", "0");
    p.put("num.network.threads", "2");
    p.put("num.io.threads", "4");
    p.put("log.flush.interval.messages", Long.toString(Long.MAX_VALUE));
    return p;
  }

  private void format() {
    try {
      new Formatter()
          .setPrintStream(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()))
          .setNodeId(1)
          .setClusterId(Uuid.randomUuid().toString())
          .setDirectories(List.of(dataDir.toString()))
          .setMetadataLogDirectory(dataDir.toString())
          .setControllerListenerName("CONTROLLER")
          .setReleaseVersion(MetadataVersion.LATEST_PRODUCTION)
          .run();
    } catch (Exception e) {
      throw new IllegalStateException("Could not format the embedded Kafka log directory " + dataDir, e);
    }
  }

  /** Starts the broker; blocks until its listeners are up. */
  public synchronized void start() {
    if (server != null) {
      return;
    }
    KafkaRaftServer s = new KafkaRaftServer(KafkaConfig.fromProps(config(), false), Time.SYSTEM);
    s.startup();
    server = s;
  }

  /** Stops the broker (controlled shutdown), keeping its data for a later {@link #start()}. */
  public synchronized void stop() {
    KafkaRaftServer s = server;
    if (s != null) {
      server = null;
      s.shutdown();
      s.awaitShutdown();
    }
  }

  /** Stops the broker and deletes its data. */
  public void destroy() {
    stop();
    try (Stream<Path> paths = Files.walk(dataDir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
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

  private static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      socket.setReuseAddress(true);
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
