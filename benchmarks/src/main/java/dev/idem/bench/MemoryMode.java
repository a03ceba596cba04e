package dev.idem.bench;

import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Properties;

/**
 * {@code -Dmode=memory}: publishes a Kafka backlog (default 1,000,000 messages plus the
 * duplicates), then drains it with Idem's default settings in a child JVM with
 * {@code -Xmx<heap>} (default 256m, {@link MemoryDrain}), and prints the peak heap in use after
 * a garbage collection, per tenth of the backlog too, so that a heap that grows with the backlog
 * shows. Checks the result like a throughput row.
 */
final class MemoryMode {

  private MemoryMode() {}

  static int run(Options options) throws Exception {
    Database db = new Database(options.postgres);
    String postgresVersion = db.serverVersion();
    Database.Tables tables = Database.Tables.unique();
    String suffix = tables.inbox().substring("bench_inbox_".length());
    double load = Jvm.loadAverage();
    Workload workload = Workload.generate(options.messages(1_000_000), options.duplicates, options.accounts, options.seed);
    Properties result = new Properties();
    List<String> failures;
    String where;
    try (KafkaEnv kafka = KafkaEnv.start(options)) {
      where = kafka.where().replace("; CPU figures are the consumer's JVM alone", "");
      String topic = "bench_memory_" + suffix;
      String group = "bench-memory-" + suffix;
      kafka.createTopic(topic, options.partitions);
      long start = System.nanoTime();
      kafka.publish(topic, workload);
      System.err.printf(Locale.ROOT, "[memory] published %,d records to %s in %.1f s%n", workload.total(), topic,
          (System.nanoTime() - start) / 1e9);
      db.reset(tables, workload.accounts());
      Path resultFile = Files.createTempFile("idem-bench-memory-", ".properties");
      Process child = Jvm
          .java(List.of("-Xmx" + options.heap), MemoryDrain.class, List.of(kafka.bootstrap(), topic, group, db.r2dbcUrl(),
              tables.inbox(), tables.accounts(), Integer.toString(workload.total()), Long.toString(options.stall.toSeconds()),
              resultFile.toString()))
          .inheritIO().start();
      int exit = child.waitFor();
      if (Files.size(resultFile) > 0) {
        try (Reader in = Files.newBufferedReader(resultFile, StandardCharsets.UTF_8)) {
          result.load(in);
        }
      }
      Files.deleteIfExists(resultFile);
      String committed = kafka.awaitCommittedToEnd(group, topic, Duration.ofSeconds(10));
      failures = new java.util.ArrayList<>(Checker.failures(workload, new Checker.Observation(
          number(result, "settled"), number(result, "processed"), number(result, "duplicates"), number(result, "deadLettered"),
          -1,
          db.dedupRows(tables), db.balances(tables), committed == null, committed)));
      if (exit != 0) {
        failures.add(0, "the consumer JVM exited with status " + exit + " (an OutOfMemoryError shows above)");
      }
      if (result.getProperty("error") != null) {
        failures.add(0, result.getProperty("error"));
      }
      kafka.deleteTopic(topic);
    } finally {
      db.drop(tables);
    }
    double mb = 1024 * 1024;
    long nanos = number(result, "nanos");
    System.out.println();
    System.out.println(
        "# Idem memory under a backlog: default settings (KafkaSource and IdempotentConsumer defaults: BY_KEY, concurrency "
            + dev.idem.IdempotentConsumer.DEFAULT_CONCURRENCY + ", prefetch " + dev.idem.IdempotentConsumer.DEFAULT_PREFETCH
            + "; pool " + dev.idem.postgres.PostgresConnections.DEFAULT_POOL_SIZE + "), per-message handler");
    System.out.println("# command: " + options.commandLine());
    System.out.println("# machine: " + Benchmark.machine(load) + "; PostgreSQL " + postgresVersion);
    System.out.printf(Locale.ROOT,
        "# kafka: a backlog of %,d messages + %,d producer duplicates on %d partitions, published before the consumer starts; %s%n",
        workload.distinct(), workload.duplicates(), options.partitions, where);
    System.out.println("# the consumer runs in a child JVM with -Xmx" + options.heap
        + "; heap after GC = heap pools in use after each collection (GC notifications)");
    System.out.println();
    System.out.printf(Locale.ROOT, "messages drained                 %,d in %.1f s (%,.0f msg/s)%n", number(result, "settled"),
        nanos / 1e9,
        nanos > 0 ? number(result, "settled") / (nanos / 1e9) : 0);
    System.out.printf(Locale.ROOT, "peak heap after GC               %.1f MB of %.0f MB max, over %d collections%n",
        number(result, "peakHeapAfterGc") / mb, number(result, "maxHeap") / mb, number(result, "collections"));
    StringBuilder deciles = new StringBuilder();
    String[] values = result.getProperty("decilePeaks", "").split(",");
    for (String v : values) {
      if (!v.isEmpty()) {
        deciles.append(deciles.length() == 0 ? "" : " ").append(String.format(Locale.ROOT, "%.0f", Long.parseLong(v) / mb));
      }
    }
    System.out.println("peak heap after GC per tenth (MB) " + deciles);
    System.out.printf(Locale.ROOT, "live heap after a full GC at end %.1f MB%n", number(result, "liveHeapAfterFullGcAtEnd") / mb);
    System.out.println();
    return failures.isEmpty() ? Benchmark.verdict(List.of(), false) : failed(failures);
  }

  private static int failed(List<String> failures) {
    failures.forEach(f -> System.out.println("FAILED: " + f));
    return Benchmark.verdict(List.of("memory drain"), false);
  }

  private static long number(Properties result, String key) {
    return Long.parseLong(result.getProperty(key, "-1"));
  }
}
