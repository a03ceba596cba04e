package dev.idem.bench;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * CPU per message of the core pipeline alone: in-memory deliveries (10% repeats), a real
 * PostgreSQL, the seeds' one-UPDATE handler. Prints one line per measured run: messages per
 * second, the consumer JVM's process CPU per message, and, when PostgreSQL runs on this host and
 * {@code /proc} is readable, the CPU of all {@code postgres} processes per message.
 *
 * <p>Run (after {@code mvn -q -o -pl core test-compile}) with the test classpath:
 * {@code java -cp core/target/classes:core/target/test-classes:<deps> dev.idem.bench.PerMessageCpu}
 * with {@code -Dmessages=20000 -Druns=3 -Dwarmup=30000 -DwarmupRuns=2 -Dconcurrency=8 -Dordering=BY_KEY -Dbatch=1 -Dprefetch=32};
 * {@code -Draw=true} runs the same statements on held connections instead (the driver's floor), per
 * message or, with {@code -Dbatch} above 1, in batches.
 * Used to compare two builds of core run alternately on the same machine (A B A B).
 */
public final class PerMessageCpu {

  private PerMessageCpu() {}

  /**
   * Runs a warm-up and the measured runs.
   *
   * @param args unused; settings are system properties
   */
  public static void main(String[] args) {
    int messages = Integer.getInteger("messages", 20_000);
    int runs = Integer.getInteger("runs", 3);
    int warmup = Integer.getInteger("warmup", 30_000);
    int warmupRuns = Integer.getInteger("warmupRuns", 2);
    int concurrency = Integer.getInteger("concurrency", IdempotentConsumer.DEFAULT_CONCURRENCY);
    int prefetch = Integer.getInteger("prefetch", IdempotentConsumer.DEFAULT_PREFETCH);
    int batch = Integer.getInteger("batch", 1);
    Ordering ordering = Ordering.valueOf(System.getProperty("ordering", "BY_KEY"));
    String label = System.getProperty("label", "run");
    PostgresService postgres = PostgresService.get();
    if (Boolean.getBoolean("raw")) {
      for (int i = 0; i < warmupRuns; i++) {
        raw(postgres, "warmup", warmup, concurrency, batch, false);
      }
      for (int i = 0; i < runs; i++) {
        raw(postgres, label, messages, concurrency, batch, true);
      }
      System.exit(0);
    }
    for (int i = 0; i < warmupRuns; i++) {
      run(postgres, "warmup", warmup, ordering, concurrency, prefetch, batch, false);
    }
    for (int i = 0; i < runs; i++) {
      run(postgres, label, messages, ordering, concurrency, prefetch, batch, true);
    }
    System.exit(0);
  }

  private static double processCpuSeconds() {
    java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() / 1e9 : Double.NaN;
  }

  /** User + system CPU ticks of every process named postgres, by pid; empty when /proc is not readable. */
  static Map<Long, Long> postgresCpuTicks() {
    Map<Long, Long> ticks = new java.util.HashMap<>();
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path p : (Iterable<Path>) procs::iterator) {
        String name = p.getFileName().toString();
        if (!name.chars().allMatch(Character::isDigit)) {
          continue;
        }
        try {
          String stat = Files.readString(p.resolve("stat"));
          int open = stat.indexOf('(');
          int close = stat.lastIndexOf(')');
          if (!stat.substring(open + 1, close).equals("postgres")) {
            continue;
          }
          String[] f = stat.substring(close + 2).split(" ");
          ticks.put(Long.parseLong(name), Long.parseLong(f[11]) + Long.parseLong(f[12]));
        } catch (IOException | RuntimeException e) {
          // the process ended meanwhile
        }
      }
    } catch (IOException e) {
      // no /proc: no figure
    }
    return ticks;
  }

  /**
   * CPU seconds that PostgreSQL's processes used between two readings: the growth of each process
   * alive at the end (processes that ended meanwhile, such as backends of connections closed
   * during the run, are left out rather than counted negative).
   */
  static double postgresCpuSeconds(Map<Long, Long> before, Map<Long, Long> after) {
    if (after.isEmpty()) {
      return Double.NaN;
    }
    long ticks = 0;
    for (Map.Entry<Long, Long> e : after.entrySet()) {
      ticks += e.getValue() - before.getOrDefault(e.getKey(), 0L);
    }
    return ticks / 100.0;
  }

  private static void run(PostgresService postgres, String label, int messages, Ordering ordering, int concurrency, int prefetch,
      int batch, boolean print) {
    String accounts = PostgresService.uniqueName("cpu_accounts");
    ConnectionPool pool = postgres.pool(concurrency);
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("cpu_inbox"));
    try {
      inbox.createSchemaIfAbsent().block();
      postgres.execute("CREATE TABLE " + accounts + " (id int PRIMARY KEY, balance bigint NOT NULL)",
          "INSERT INTO " + accounts + " SELECT g, 0 FROM generate_series(0, 999) g");
      String sql = "UPDATE " + accounts + " SET balance = balance + $1 WHERE id = $2";
      Handler<Integer> credit = (account, tx) -> tx.sql(sql).bind(0, 1L).bind(1, account).execute();
      IdempotentConsumer<Integer> consumer = IdempotentConsumer.<Integer>named("cpu").inbox(inbox).handler(credit)
          .ordering(ordering).concurrency(concurrency).maxBatchSize(batch).prefetch(prefetch).build();
      Flux<TestDelivery<Integer>> source = Flux.range(0, messages + messages / 10)
          .map(i -> i < messages ? i : (i - messages) * 10)
          .map(i -> TestDelivery.keyed("m-" + i, "k-" + (i % 1000), i % 1000));
      System.gc();
      long start = System.nanoTime();
      double cpuStart = processCpuSeconds();
      Map<Long, Long> pgStart = postgresCpuTicks();
      Map<Outcome.Status, Long> outcomes = consumer.process(source)
          .collect(Collectors.groupingBy(Outcome::status, Collectors.counting())).block(Duration.ofMinutes(30));
      double seconds = (System.nanoTime() - start) / 1e9;
      double cpu = processCpuSeconds() - cpuStart;
      double pg = postgresCpuSeconds(pgStart, postgresCpuTicks());
      long effects = postgres.count("SELECT sum(balance) FROM " + accounts);
      if (effects != messages || outcomes.getOrDefault(Outcome.Status.DUPLICATE, 0L) != messages / 10) {
        throw new IllegalStateException("wrong result: " + effects + " effects, outcomes " + outcomes);
      }
      int total = messages + messages / 10;
      if (print) {
        System.out.printf(Locale.ROOT, "%s %s c%d p%d b%d msgs=%d msg/s=%.0f cpu_ms/msg=%.4f pg_cpu_ms/msg=%.4f load=%s%n", label,
            ordering,
            concurrency, prefetch, batch, total, total / seconds, cpu * 1000 / total, pg * 1000 / total, load());
      }
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + inbox.table());
      pool.dispose();
    }
  }

  /**
   * The driver's floor: the same statements per message (BEGIN with the default SET LOCALs, the
   * dedup insert, the UPDATE when new, COMMIT) on {@code concurrency} connections held for the
   * whole run, each lane taking its keys in order, with the fewest operators around them. With
   * {@code batch} above 1, each lane's messages go in transactions of {@code batch} as a batch
   * does: BEGIN sent with one multi-row dedup insert, the UPDATE of each new message in order,
   * COMMIT.
   */
  private static void raw(PostgresService postgres, String label, int messages, int concurrency, int batch, boolean print) {
    String accounts = PostgresService.uniqueName("cpu_accounts");
    ConnectionPool pool = postgres.pool(concurrency);
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("cpu_inbox"));
    try {
      inbox.createSchemaIfAbsent().block();
      postgres.execute("CREATE TABLE " + accounts + " (id int PRIMARY KEY, balance bigint NOT NULL)",
          "INSERT INTO " + accounts + " SELECT g, 0 FROM generate_series(0, 999) g");
      String update = "UPDATE " + accounts + " SET balance = balance + $1 WHERE id = $2";
      String insert = "INSERT INTO " + inbox.table() + " (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";
      String begin = Boolean.getBoolean("raw.plainBegin")
          ? "BEGIN"
          : "BEGIN;" + dev.idem.ServerTimeouts.derivedFrom(IdempotentConsumer.DEFAULT_TRANSACTION_TIMEOUT).setLocalSql();
      boolean pipeline = Boolean.getBoolean("raw.pipeline");
      String insertMany = "INSERT INTO " + inbox.table()
          + " (consumer, message_id) SELECT $1, id FROM unnest($2::text[]) AS ids(id)"
          + " ORDER BY id ON CONFLICT DO NOTHING RETURNING message_id";
      java.util.List<io.r2dbc.spi.Connection> connections = Flux.range(0, concurrency).flatMap(i -> pool.create()).collectList()
          .block();
      java.util.List<java.util.List<Integer>> lanes = new java.util.ArrayList<>();
      for (int i = 0; i < concurrency; i++) {
        lanes.add(new java.util.ArrayList<>());
      }
      for (int i = 0; i < messages + messages / 10; i++) {
        int id = i < messages ? i : (i - messages) * 10;
        lanes.get(Math.floorMod(("k-" + (id % 1000)).hashCode(), concurrency)).add(id);
      }
      System.gc();
      long start = System.nanoTime();
      double cpuStart = processCpuSeconds();
      Map<Long, Long> pgStart = postgresCpuTicks();
      long processed = Flux.range(0, concurrency).flatMap(lane -> {
        io.r2dbc.spi.Connection c = connections.get(lane);
        if (batch > 1) {
          return Flux.fromIterable(lanes.get(lane)).buffer(batch).concatMap(ids -> rawBatch(c, begin, insertMany, update, ids));
        }
        return Flux.fromIterable(lanes.get(lane)).concatMap(id -> {
          Mono<Long> b = Flux.from(c.createStatement(begin).execute()).concatMap(io.r2dbc.spi.Result::getRowsUpdated)
              .then(Mono.just(0L));
          Mono<Long> in = Flux.from(c.createStatement(insert).bind(0, "cpu").bind(1, "m-" + id).execute())
              .concatMap(io.r2dbc.spi.Result::getRowsUpdated).reduce(0L, Long::sum);
          return (pipeline ? Mono.zip(b, in, (x, y) -> y) : b.then(in))
              .flatMap(n -> n > 0
                  ? Flux.from(c.createStatement(update).bind(0, 1L).bind(1, id % 1000).execute())
                      .concatMap(io.r2dbc.spi.Result::getRowsUpdated).then(Mono.just(1))
                  : Mono.just(0))
              .flatMap(n -> Mono.from(c.commitTransaction()).thenReturn(n));
        });
      }, concurrency).reduce(0L, Long::sum).block(Duration.ofMinutes(30));
      double seconds = (System.nanoTime() - start) / 1e9;
      double cpu = processCpuSeconds() - cpuStart;
      double pg = postgresCpuSeconds(pgStart, postgresCpuTicks());
      Flux.fromIterable(connections).flatMap(io.r2dbc.spi.Connection::close).blockLast();
      if (processed != messages) {
        throw new IllegalStateException("wrong result: " + processed);
      }
      int total = messages + messages / 10;
      if (print) {
        System.out.printf(Locale.ROOT, "%s RAW c%d b%d msgs=%d msg/s=%.0f cpu_ms/msg=%.4f pg_cpu_ms/msg=%.4f load=%s%n", label,
            concurrency, batch,
            total, total / seconds, cpu * 1000 / total, pg * 1000 / total, load());
      }
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + inbox.table());
      pool.dispose();
    }
  }

  /** One batch's transaction on a held connection; emits how many of its messages were new. */
  private static Mono<Integer> rawBatch(Connection c, String begin, String insertMany, String update, List<Integer> ids) {
    String[] names = ids.stream().map(id -> "m-" + id).toArray(String[]::new);
    Mono<Long> started = Flux.from(c.createStatement(begin).execute()).concatMap(Result::getRowsUpdated).then(Mono.just(0L));
    Mono<Set<String>> fresh = Flux.from(c.createStatement(insertMany).bind(0, "cpu").bind(1, names).execute())
        .concatMap(result -> result.map(row -> row.get(0, String.class))).collect(Collectors.toSet());
    return Mono.zip(started, fresh, (ignored, newIds) -> newIds)
        .flatMap(newIds -> Flux.fromIterable(ids).filter(id -> newIds.contains("m-" + id))
            .concatMap(id -> Flux.from(c.createStatement(update).bind(0, 1L).bind(1, id % 1000).execute())
                .concatMap(Result::getRowsUpdated).then(Mono.just(1)))
            .reduce(0, Integer::sum))
        .flatMap(n -> Mono.from(c.commitTransaction()).thenReturn(n));
  }

  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (IOException e) {
      return "?";
    }
  }
}
