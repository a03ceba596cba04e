package dev.idem.bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Latency mode with several rows or both brokers: each row of each broker runs in a child JVM of
 * its own ({@code -Drows=ID -Dbroker=...}, the other options passed on; Kafka's broker, when this
 * process starts one, is shared through {@code -Dkafka}), one after the other, and their table
 * lines are printed as one table. So no row runs on code that another row compiled: a per-message
 * row (L2) that ran after the batch row L1 in the same JVM kept up at 1,000 msg/s where alone, as
 * an application runs it, it fell seconds behind.
 */
final class LatencyRows {

  /** Options a child gets from this process's command line; mode, broker, rows and kafka are set per child. */
  private static final Set<String> PER_CHILD = Set.of("mode", "broker", "rows", "kafka");

  private LatencyRows() {}

  static int eachInItsOwnJvm(Options options, List<String> rows) throws Exception {
    List<String> brokers = new ArrayList<>();
    if (options.kafka) {
      brokers.add("kafka");
    }
    if (options.rabbit) {
      brokers.add("rabbit");
    }
    List<String> header = new ArrayList<>();
    List<String> table = new ArrayList<>();
    List<String> failed = new ArrayList<>();
    try (KafkaEnv kafka = options.kafka ? KafkaEnv.start(options) : null) {
      for (String broker : brokers) {
        for (String row : rows) {
          if (row.equals(LatencyMode.SHARE_ROW) && !broker.equals("kafka")) {
            continue; // share groups are Kafka's
          }
          List<String> jvm = new ArrayList<>();
          for (String[] property : Options.PROPERTIES) {
            String value = System.getProperty(property[0]);
            if (value != null && !PER_CHILD.contains(property[0])) {
              jvm.add("-D" + property[0] + "=" + value);
            }
          }
          jvm.add("-Dmode=latency");
          jvm.add("-Dbroker=" + broker);
          jvm.add("-Drows=" + row);
          if (kafka != null) {
            jvm.add("-Dkafka=" + kafka.bootstrap());
          }
          System.err.printf("[%s] latency %s in a JVM of its own ...%n", broker, row);
          Process child = Jvm.java(jvm, Benchmark.class, List.of()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
          Thread stopChild = new Thread(child::destroy); // a row's JVM ends with this one
          Runtime.getRuntime().addShutdownHook(stopChild);
          try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line = out.readLine(); line != null; line = out.readLine()) {
              if (line.startsWith("| " + broker + " ")) {
                table.add(line);
              } else if (line.startsWith("FAILED:")) {
                System.out.println(line);
              } else if (line.startsWith("# ") && !line.startsWith("# command:") && !header.contains(line)
                  && !line.startsWith("# " + (broker.equals("kafka") ? "rabbit" : "kafka") + ":")) {
                header.add(line);
              }
            }
          }
          int exit = child.waitFor();
          Runtime.getRuntime().removeShutdownHook(stopChild);
          if (exit != 0) {
            failed.add(broker + " " + row + " (its JVM exited with " + exit + ")");
          }
        }
      }
    }
    System.out.println();
    boolean first = true;
    for (String line : header) {
      System.out.println(line);
      if (first) {
        System.out.println("# command: " + options.commandLine());
        System.out.println("# each row of each broker ran in a JVM of its own, one after the other, in the order of the table");
        first = false;
      }
    }
    System.out.println();
    System.out.println(LatencyMode.TABLE_HEADER);
    table.forEach(System.out::println);
    System.out.println();
    return Benchmark.verdict(failed, table.isEmpty());
  }
}
