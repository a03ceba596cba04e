package dev.idem.bench;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import reactor.core.publisher.Flux;

/**
 * Messages per second through the core pipeline on a real PostgreSQL: one transaction per
 * message (dedup insert, one business UPDATE, commit), in-memory deliveries so that only the
 * pipeline and the database are measured. 10% of the messages are duplicates.
 *
 * <p>Run: {@value #COMMAND}
 */
public final class CoreThroughputBenchmark {

  static final String COMMAND = "mvn -q -pl core test-compile exec:java -Dexec.skip=false -Dexec.classpathScope=test -Dexec.mainClass=dev.idem.bench.CoreThroughputBenchmark [-Dmessages=20000]";

  private CoreThroughputBenchmark() {}

  /**
   * Runs the benchmark and prints a table.
   *
   * @param args unused; {@code -Dmessages=N} sets the message count
   */
  public static void main(String[] args) {
    int messages = Integer.getInteger("messages", 20_000);
    PostgresService postgres = PostgresService.get();
    System.out
        .println("# Idem core throughput, " + messages + " messages + 10% duplicates per run, PostgreSQL at " + postgres.url());
    System.out.println("# command: " + COMMAND);
    System.out.printf("%-10s %11s %6s %10s %12s %14s %10s%n", "ordering", "concurrency", "batch", "seconds", "messages/s",
        "cpu s/1000 msg", "effects");
    for (Ordering ordering : List.of(Ordering.UNORDERED, Ordering.BY_KEY)) {
      for (int concurrency : new int[]{1, 4, 8, 16}) {
        run(postgres, messages, ordering, concurrency, 1);
      }
      for (int batch : new int[]{16, 64, 256}) {
        run(postgres, messages, ordering, 4, batch);
      }
    }
    System.exit(0);
  }

  private static double processCpuSeconds() {
    java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() / 1e9 : Double.NaN;
  }

  private static void run(PostgresService postgres, int messages, Ordering ordering, int concurrency, int batch) {
    String accounts = PostgresService.uniqueName("bench_accounts");
    ConnectionPool pool = postgres.pool(concurrency);
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("bench_inbox"));
    try {
      inbox.createSchemaIfAbsent().block();
      postgres.execute("CREATE TABLE " + accounts + " (id int PRIMARY KEY, balance bigint NOT NULL)",
          "INSERT INTO " + accounts + " SELECT g, 0 FROM generate_series(0, 999) g");
      Handler<Integer> credit = (account, tx) -> tx.sql("UPDATE " + accounts + " SET balance = balance + 1 WHERE id = $1")
          .bind(0, account).execute();
      IdempotentConsumer<Integer> consumer = IdempotentConsumer.<Integer>named("bench").inbox(inbox).handler(credit)
          .ordering(ordering).concurrency(concurrency).maxBatchSize(batch)
          .prefetch(Math.max(64, concurrency * Math.max(4, batch))).build();
      Flux<TestDelivery<Integer>> source = Flux.range(0, messages + messages / 10)
          .map(i -> i < messages ? i : (i - messages) * 10) // the tail repeats every tenth id
          .map(i -> TestDelivery.keyed("m-" + i, "k-" + (i % 1000), i % 1000));

      long start = System.nanoTime();
      double cpuStart = processCpuSeconds();
      Map<Outcome.Status, Long> outcomes = consumer.process(source)
          .collect(Collectors.groupingBy(Outcome::status, Collectors.counting())).block(Duration.ofMinutes(10));
      double seconds = (System.nanoTime() - start) / 1e9;
      double cpu = processCpuSeconds() - cpuStart;
      long effects = postgres.count("SELECT sum(balance) FROM " + accounts);
      if (effects != messages || outcomes.getOrDefault(Outcome.Status.DUPLICATE, 0L) != messages / 10) {
        throw new IllegalStateException("wrong result: " + effects + " effects, outcomes " + outcomes);
      }
      int total = messages + messages / 10;
      System.out.printf("%-10s %11d %6d %10.2f %12.0f %14.3f %10d%n", ordering, concurrency, batch, seconds, total / seconds,
          cpu * 1000 / total, effects);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + inbox.table());
      pool.dispose();
    }
  }
}
