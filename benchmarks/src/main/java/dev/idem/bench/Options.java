package dev.idem.bench;

import dev.idem.kafka.KafkaEngine;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The benchmark's settings, from system properties ({@code -Dname=value} on the Maven command
 * line, which {@code exec:java} passes to the benchmark's JVM). An invalid value fails at start
 * with a message that names the property.
 */
final class Options {

  /** The command that runs the benchmark; options are appended as {@code -Dname=value}. */
  static final String COMMAND = "mvn -q -pl benchmarks -am package -DskipTests exec:java";

  /** Every property the benchmark reads, with its meaning, for {@code -Dhelp} and the command line it prints. */
  static final String[][] PROPERTIES = {
      {"mode",
          "throughput (default): the table; memory: drain a backlog with default settings in a child JVM and report its heap; latency: p50/p99 publish-to-settle at a fixed rate"},
      {"broker", "kafka, rabbit or both (default both; memory mode: Kafka only)"},
      {"messages", "distinct messages (default 400000 per broker, rows of 30 s and more; memory 1000000)"},
      {"duplicates", "producer duplicates as a fraction of the messages (default 0.05)"},
      {"accounts", "accounts (default 1000)"},
      {"partitions", "Kafka partitions (default 4)"},
      {"rows",
          "only these rows, e.g. 1,2,4b (default all; with -DkafkaEngine=both, 4b runs 4b and 4b-rk, 4b-rk runs only that); latency mode: "
              + "L0 (the JDBC loop of row 3), L1 (defaults), L2 (old defaults), L3 (batch 64, BatchHandler), L4 (defaults but UNORDERED on a Kafka share group), e.g. -Drows=L2 to measure one row in a JVM of its own"},
      {"kafkaEngine",
          "the Kafka adapter's engine in rows 1b and 4a-5d: native (default), reactor-kafka or both (each of those rows once per engine, "
              + "the Reactor Kafka ones as 1b-rk, 4b-rk, ..., and a column native over Reactor Kafka); reactor-kafka and both need -Dkafka.version=3.9.1"},
      {"rounds",
          "throughput mode: timed rounds of every row, in the table's order and reversed every other round (a later row in a JVM runs"
              + " faster); each row reports its median round and every round's rate (default 3)"},
      {"warmup",
          "messages of the untimed warm-up pass through the same rows before the timed ones, per broker (default 100000 in throughput mode, "
              + "where the JIT needs that many for Idem's rows to reach their steady CPU per message; 30000 in latency mode, 30 s at the"
              + " default rate: with 5000 the JIT still compiled for 9 to 26 s of a 30 s row, and its p99 measured the JIT; 5000 in"
              + " memory mode; 0: none)"},
      {"postgres", "postgresql://user[:password]@host:port/database (default postgresql://postgres@127.0.0.1:5432/test)"},
      {"kafka",
          "bootstrap servers of an external Kafka (default: a KRaft broker from Kafka's jars, kafka-broker.version of the root pom, in a child JVM)"},
      {"rabbit", "AMQP URI (default amqp://guest:guest@127.0.0.1:5672)"},
      {"rabbitQueueType", "classic (default) or quorum"},
      {"rate", "latency mode: messages per second (default 1000)"},
      {"seconds", "latency mode: seconds of measured publishing (default 20, after 2 s of warm-up)"},
      {"heap", "memory mode: the consumer JVM's -Xmx (default 256m)"},
      {"stallSeconds", "a row that settles nothing for this long fails (default 120)"},
      {"seed", "random seed of the workload (default 42)"},
      {"profile", "true: print each row's CPU time per thread group to standard error"},
      {"idem.groupCommit",
          "false: Idem's rows start a batch without waiting for a commit in flight (group commit off, for an A/B comparison; "
              + "default on)"},
  };

  final String mode;
  final boolean kafka;
  final boolean rabbit;
  final Integer messages;
  final double duplicates;
  final int accounts;
  final int partitions;
  final Set<String> rows;
  final List<KafkaEngine> kafkaEngines;
  final int rounds;
  final int warmup;
  final String postgres;
  final String kafkaBootstrap;
  final String rabbitUri;
  final boolean rabbitQuorum;
  final int rate;
  final int seconds;
  final String heap;
  final Duration stall;
  final long seed;

  private Options() {
    mode = oneOf("mode", "throughput", "throughput", "memory", "latency");
    String broker = oneOf("broker", "both", "kafka", "rabbit", "both");
    kafka = !broker.equals("rabbit");
    rabbit = !broker.equals("kafka") && !mode.equals("memory");
    messages = System.getProperty("messages") == null ? null : positive("messages", 1);
    duplicates = fraction("duplicates", 0.05);
    accounts = positive("accounts", 1000);
    partitions = positive("partitions", 4);
    String only = System.getProperty("rows", "").trim();
    rows = only.isEmpty()
        ? Set.of()
        : Arrays.stream(only.split(",")).map(String::trim).map(s -> s.toLowerCase(Locale.ROOT))
            .collect(Collectors.toUnmodifiableSet());
    kafkaEngines = switch (oneOf("kafkaEngine", "native", "native", "reactor-kafka", "both")) {
      case "native" -> List.of(KafkaEngine.NATIVE);
      case "reactor-kafka" -> List.of(KafkaEngine.REACTOR_KAFKA);
      default -> List.of(KafkaEngine.NATIVE, KafkaEngine.REACTOR_KAFKA);
    };
    if (kafka && kafkaEngines.contains(KafkaEngine.REACTOR_KAFKA) && !AppInfoParser.getVersion().startsWith("3.")) {
      throw new IllegalArgumentException(
          "-DkafkaEngine=" + System.getProperty("kafkaEngine") + " runs Reactor Kafka, which needs kafka-clients 3.x, but "
              + AppInfoParser.getVersion() + " is on the class path: add -Dkafka.version=3.9.1 to the command line");
    }
    rounds = positive("rounds", 3);
    warmup = System.getProperty("warmup", "").trim().equals("0") ? 0 : positive("warmup", switch (mode) {
      case "throughput" -> 100_000;
      case "latency" -> 30_000;
      default -> 5000;
    });
    postgres = System.getProperty("postgres", "postgresql://postgres@127.0.0.1:5432/test");
    String bootstrap = System.getProperty("kafka", "").trim();
    kafkaBootstrap = bootstrap.isEmpty() ? null : bootstrap;
    rabbitUri = System.getProperty("rabbit", "amqp://guest:guest@127.0.0.1:5672");
    rabbitQuorum = oneOf("rabbitQueueType", "classic", "classic", "quorum").equals("quorum");
    rate = positive("rate", 1000);
    seconds = positive("seconds", 20);
    heap = System.getProperty("heap", "256m");
    if (!heap.matches("[0-9]+[kKmMgG]?")) {
      throw new IllegalArgumentException("-Dheap must be a JVM heap size such as 256m, was " + heap);
    }
    stall = Duration.ofSeconds(positive("stallSeconds", 120));
    seed = Long.getLong("seed", 42L);
  }

  static Options fromSystemProperties() {
    return new Options();
  }

  /** Distinct messages for a broker: {@code -Dmessages} or the mode's default. */
  int messages(int defaultCount) {
    return messages != null ? messages : defaultCount;
  }

  boolean runs(String rowId) {
    return rows.isEmpty() || rows.contains(rowId.toLowerCase(Locale.ROOT));
  }

  /** Whether a row through the adapter runs on this engine: its own id or that of its native row was asked for. */
  boolean runs(String rowId, KafkaEngine engine) {
    return runs(rowId) || runs(rowId + ThroughputRows.suffix(engine));
  }

  /** The command line that reproduces this run: {@link #COMMAND} with every property that was set. */
  String commandLine() {
    List<String> parts = new ArrayList<>();
    parts.add(COMMAND);
    if (System.getProperty("kafka.version") != null) {
      parts.add("-Dkafka.version=" + System.getProperty("kafka.version"));
    }
    for (String[] property : PROPERTIES) {
      String value = System.getProperty(property[0]);
      if (value != null) {
        parts.add(
            "-D" + property[0] + "=" + (property[0].equals("postgres") || property[0].equals("rabbit") ? masked(value) : value));
      }
    }
    return String.join(" ", parts);
  }

  static String masked(String uri) {
    return uri.replaceAll("(//[^:/@]+:)[^@]*@", "$1***@");
  }

  static String help() {
    StringBuilder out = new StringBuilder("Idem end-to-end benchmark. Run: " + COMMAND + " [-Dname=value ...]\n");
    for (String[] property : PROPERTIES) {
      out.append(String.format(Locale.ROOT, "  -D%-16s %s%n", property[0], property[1]));
    }
    return out.toString();
  }

  private static String oneOf(String name, String defaultValue, String... allowed) {
    String value = System.getProperty(name, defaultValue).trim().toLowerCase(Locale.ROOT);
    if (!Arrays.asList(allowed).contains(value)) {
      throw new IllegalArgumentException("-D" + name + " must be one of " + String.join(", ", allowed) + ", was " + value);
    }
    return value;
  }

  private static int positive(String name, int defaultValue) {
    String value = System.getProperty(name);
    if (value == null) {
      return defaultValue;
    }
    try {
      int n = Integer.parseInt(value.trim().replace("_", "").replace(",", ""));
      if (n < 1) {
        throw new NumberFormatException();
      }
      return n;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("-D" + name + " must be a positive integer, was " + value, e);
    }
  }

  private static double fraction(String name, double defaultValue) {
    String value = System.getProperty(name);
    if (value == null) {
      return defaultValue;
    }
    try {
      double d = Double.parseDouble(value.trim());
      if (!(d >= 0 && d <= 1)) {
        throw new NumberFormatException();
      }
      return d;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("-D" + name + " must be a fraction from 0 to 1, was " + value, e);
    }
  }
}
