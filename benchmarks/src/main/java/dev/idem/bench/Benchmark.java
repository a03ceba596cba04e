package dev.idem.bench;

import dev.idem.kafka.KafkaEngine;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Idem's end-to-end benchmark against its peers on the real services: Kafka (a KRaft broker of
 * its own in a child JVM, or {@code -Dkafka=host:port}), RabbitMQ and PostgreSQL. Three modes:
 * <ul>
 *   <li>{@code throughput} (default): one table of rows (the broker alone, Idem's adapter alone,
 *       two blocking JDBC loops, Idem per message and in batches), all on the same pre-published
 *       payment events with 5% producer duplicates, each row checked for one effect per id and
 *       correct balances;</li>
 *   <li>{@code memory}: {@link MemoryMode};</li>
 *   <li>{@code latency}: {@link LatencyMode}.</li>
 * </ul>
 * A row that fails its check is printed as FAILED and the process exits with status 1.
 *
 * <p>Run: {@value Options#COMMAND} [-Dmode=...] [-Dbroker=kafka|rabbit|both] [-Dmessages=N] ...;
 * {@code -Dhelp=true} lists the options.
 */
public final class Benchmark {

  /** Distinct messages of a throughput row on either broker, unless {@code -Dmessages} says otherwise: long enough to measure (30 s and more here). */
  static final int DEFAULT_MESSAGES = 400_000;

  /** RabbitMQ's rows run once; the Kafka engine means nothing to them. */
  private static final List<KafkaEngine> RABBIT_ENGINES = List.of(KafkaEngine.NATIVE);

  private Benchmark() {}

  /**
   * Runs the benchmark and exits: 0 when every row passed its check, 1 when one failed, 2 for
   * bad options.
   *
   * @param args unused; options are system properties
   */
  public static void main(String[] args) {
    int status;
    if (Boolean.getBoolean("help")) {
      System.out.print(Options.help());
      status = 0;
    } else {
      try {
        Options options = Options.fromSystemProperties();
        status = switch (options.mode) {
          case "memory" -> MemoryMode.run(options);
          case "latency" -> LatencyMode.run(options);
          default -> throughput(options);
        };
      } catch (IllegalArgumentException e) {
        System.err.println("bad option: " + e.getMessage());
        System.err.print(Options.help());
        status = 2;
      } catch (Exception e) {
        e.printStackTrace();
        System.out.println("RESULT: FAILED: " + e);
        status = 1;
      }
    }
    System.out.flush();
    System.exit(status);
  }

  static int throughput(Options options) throws Exception {
    Database db = new Database(options.postgres);
    String postgresVersion = db.serverVersion();
    Database.Tables tables = Database.Tables.unique();
    String suffix = tables.inbox().substring("bench_inbox_".length());
    List<RowResult> results = new ArrayList<>();
    List<String> warmUpFailures = new ArrayList<>();
    List<String> setup = new ArrayList<>();
    double load = Jvm.loadAverage();
    try {
      if (options.kafka) {
        Workload workload = Workload.generate(options.messages(DEFAULT_MESSAGES), options.duplicates, options.accounts,
            options.seed);
        try (KafkaEnv kafka = KafkaEnv.start(options)) {
          if (options.warmup > 0) {
            Workload warm = Workload.generate(options.warmup, options.duplicates, options.accounts, options.seed + 1);
            String warmTopic = "bench_warmup_" + suffix;
            kafka.createTopic(warmTopic, options.partitions);
            kafka.publish(warmTopic, warm);
            warmUpFailures.addAll(failedRows(new ThroughputRows("kafka", "kafka warm-up", options, db, tables, warm,
                (rowId, engine) -> new KafkaFeed(kafka, warmTopic, "bench-warmup-" + suffix + "-" + rowId, engine, options.stall),
                options.kafkaEngines, 1, kafka.brokerPid()).run(), "warm-up "));
            kafka.deleteTopic(warmTopic);
          }
          String topic = "bench_payments_" + suffix;
          kafka.createTopic(topic, options.partitions);
          long start = System.nanoTime();
          kafka.publish(topic, workload);
          System.err.printf(Locale.ROOT, "[kafka] published %,d records to %s in %.1f s%n", workload.total(), topic,
              (System.nanoTime() - start) / 1e9);
          setup.add(String.format(Locale.ROOT,
              "kafka: %,d messages + %,d producer duplicates on %d partitions keyed by account; a fresh consumer group "
                  + "per row reads from the beginning; kafka-clients %s; %s",
              workload.distinct(), workload.duplicates(), options.partitions,
              AppInfoParser.getVersion(), kafka.where()));
          results.addAll(new ThroughputRows("kafka", "kafka", options, db, tables, workload,
              (rowId, engine) -> new KafkaFeed(kafka, topic, "bench-" + suffix + "-" + rowId, engine, options.stall),
              options.kafkaEngines,
              options.rounds, kafka.brokerPid()).run());
          kafka.deleteTopic(topic);
        }
      }
      if (options.rabbit) {
        Workload workload = Workload.generate(options.messages(DEFAULT_MESSAGES), options.duplicates, options.accounts,
            options.seed);
        try (RabbitEnv rabbit = new RabbitEnv(options.rabbitUri, options.rabbitQuorum)) {
          setup.add(String.format(Locale.ROOT,
              "rabbit: %,d messages + %,d producer duplicates, published to a fresh queue before each row; %s at %s",
              workload.distinct(), workload.duplicates(), rabbit.version(), Options.masked(options.rabbitUri)));
          if (options.warmup > 0) {
            Workload warm = Workload.generate(options.warmup, options.duplicates, options.accounts, options.seed + 1);
            warmUpFailures.addAll(failedRows(new ThroughputRows("rabbit", "rabbit warm-up", options, db, tables, warm,
                (rowId, engine) -> new RabbitFeed(rabbit, "bench_warmup_" + suffix + "_" + rowId, warm, options.stall),
                RABBIT_ENGINES, 1, rabbitPid(options)).run(),
                "warm-up "));
          }
          results.addAll(new ThroughputRows("rabbit", "rabbit", options, db, tables, workload,
              (rowId, engine) -> new RabbitFeed(rabbit, "bench_payments_" + suffix + "_" + rowId, workload, options.stall),
              RABBIT_ENGINES,
              options.rounds, rabbitPid(options)).run());
        }
      }
    } finally {
      db.drop(tables);
    }
    System.out.println();
    System.out.println("# Idem end-to-end throughput: payment events (account, amount) with a message id, "
        + Math.round(options.duplicates * 100) + "% producer duplicates, " + options.accounts + " accounts");
    System.out.println("# command: " + options.commandLine());
    System.out.println("# machine: " + machine(load) + "; PostgreSQL " + postgresVersion);
    setup.forEach(line -> System.out.println("# " + line));
    if (options.warmup > 0) {
      System.out.printf(Locale.ROOT,
          "# before the timed rows of each broker, the same rows ran untimed on %,d other messages (JIT warm-up)%n",
          options.warmup);
    }
    System.out
        .println("# msg/s: deliveries (duplicates included) from the first delivery to the last settlement (ack, or Kafka offset "
            + "marked for commit); x ...: an Idem row's msg/s over the peer's; CPU: the benchmark JVM's process CPU time in that window;"
            + " broker CPU: the local broker process's CPU time from the row's start to its stop");
    System.out.println();
    System.out.print(ResultTable.format(results));
    System.out.println();
    List<String> failed = new ArrayList<>(warmUpFailures);
    failed.addAll(failedRows(results, ""));
    return verdict(failed, results.isEmpty());
  }

  /** The local RabbitMQ node's pid ({@code beam.smp}) when the benchmark talks to a broker on this machine, else -1. */
  private static long rabbitPid(Options options) {
    String host = URI.create(options.rabbitUri).getHost();
    return host != null && (host.equals("127.0.0.1") || host.equals("localhost")) ? ProcessCpu.find("beam.smp") : -1;
  }

  private static List<String> failedRows(List<RowResult> results, String prefix) {
    return results.stream().filter(r -> !r.ok())
        .map(r -> prefix + r.broker() + " row " + r.id() + " (" + String.join("; ", r.failures()) + ")").toList();
  }

  static int verdict(List<String> failed, boolean nothingRan) {
    if (nothingRan) {
      System.out.println("RESULT: FAILED: no row ran (check -Drows and -Dbroker)");
      return 1;
    }
    if (!failed.isEmpty()) {
      System.out.println("RESULT: FAILED: " + failed.size() + " row(s) failed their check: " + String.join(", ", failed));
      System.out.println("**************** BENCHMARK FAILED ****************");
      return 1;
    }
    System.out.println(
        "RESULT: OK - every row applied one effect per distinct message id and every balance equals the sum of its distinct events");
    return 0;
  }

  static String machine(double loadAverage) {
    return Runtime.getRuntime().availableProcessors() + " cores, " + System.getProperty("os.name") + " "
        + System.getProperty("os.arch")
        + String.format(Locale.ROOT, ", load average %.2f at start", loadAverage)
        + ", JVM " + System.getProperty("java.vm.name") + " " + System.getProperty("java.runtime.version")
        + " (max heap " + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " MB)";
  }
}
