package dev.idem.bench;

import com.rabbitmq.client.Channel;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.KafkaEngine;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;
import org.apache.kafka.clients.producer.KafkaProducer;
import reactor.core.Disposable;

/**
 * {@code -Dmode=latency}: with the consumer running and caught up, publishes at a fixed rate
 * ({@code -Drate}, default 1,000 msg/s) for 2 s of warm-up plus {@code -Dseconds} (default 20),
 * and prints p50, p99 and the maximum of the time from the publisher's {@code send} to the
 * message's settlement (its outcome, emitted after the ack; on Kafka the offset is then committed
 * within the commit interval) for per-message and batch mode. The publish time travels in the
 * payload; publisher and consumer share this JVM's clock. {@code -Drows=L1,L2,L3} picks the rows
 * (defaults, old defaults, batches of 64 with a {@code BatchHandler}). Each row of each broker runs
 * in a JVM of its own ({@link LatencyRows}): a row that ran before in the same JVM left its
 * compiled code behind, and a per-message row (L2) kept up after a batch row and fell seconds
 * behind alone. Each row also reports its mean transaction, the most its lanes can settle per
 * second without batching ({@code concurrency / mean transaction}), the process's CPU per message
 * and the JIT's time during the row.
 */
final class LatencyMode {

  static final int WARMUP_SECONDS = 2;

  static final String TABLE_HEADER = "| broker | mode | published msg/s | measured | p50 ms | p99 ms | max ms | tx ms | lanes' msg/s | CPU ms/msg | JIT s | check |\n"
      + "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|";

  private LatencyMode() {}

  /** The row of the blocking JDBC loop (throughput row 3): the floor the defaults' latency is read against. */
  static final String LOOP_ROW = "L0";
  static final String LOOP_LABEL = "JDBC loop, 1 transaction per poll (as row 3)";

  /** The row that reads a Kafka share group (KafkaShareSource, one share consumer) instead of a consumer group; Kafka only. */
  static final String SHARE_ROW = "L4";

  private record Line(String broker, String mode, double publishedPerSecond, long[] sorted, List<String> failures,
      IdemSetting setting,
      TransactionTimes times) {}

  static int run(Options options) throws Exception {
    Database db = new Database(options.postgres);
    String postgresVersion = db.serverVersion();
    Database.Tables tables = Database.Tables.unique();
    String suffix = tables.inbox().substring("bench_inbox_".length());
    double load = Jvm.loadAverage();
    int total = options.rate * (options.seconds + WARMUP_SECONDS);
    Workload measured = Workload.generate((int) Math.round(total / (1 + options.duplicates)), options.duplicates,
        options.accounts, options.seed);
    // L0 is no Idem setting: its pool size of 1 and batch of 500 only fill the table's columns.
    List<IdemSetting> settings = Stream
        .of(new IdemSetting(LOOP_ROW, Ordering.UNORDERED, 1, 500, 500, true), IdemSetting.defaults("L1"),
            IdemSetting.oldDefaults("L2"),
            new IdemSetting("L3", Ordering.BY_KEY, 4, 256, 64, true),
            IdemSetting.defaults(SHARE_ROW).withOrdering(Ordering.UNORDERED))
        .filter(setting -> options.runs(setting.id())).toList();
    if (settings.isEmpty()) {
      throw new IllegalArgumentException(
          "-Drows=" + System.getProperty("rows") + " names no latency row: L0 (the JDBC loop), L1 (defaults), L2 (old defaults),"
              + " L3 (batch 64, BatchHandler), L4 (defaults but UNORDERED, Kafka share group)");
    }
    if (settings.size() > 1 || options.kafka && options.rabbit) {
      // What one row leaves in a JVM (compiled code above all) must not shape the next row's figures.
      return LatencyRows.eachInItsOwnJvm(options, settings.stream().map(IdemSetting::id).toList());
    }
    Workload warm = Workload.generate(Math.max(1, options.warmup), options.duplicates, options.accounts, options.seed + 1);
    List<Line> lines = new ArrayList<>();
    List<Line> warmUpLines = new ArrayList<>();
    List<String> setup = new ArrayList<>();
    try {
      if (options.kafka) {
        try (KafkaEnv kafka = KafkaEnv.start(options)) {
          setup.add(
              "kafka: " + options.partitions + " partitions keyed by account, producer acks=all linger.ms=0; " + kafka.where());
          for (int pass = options.warmup > 0 ? 0 : 1; pass < 2; pass++) {
            Workload workload = pass == 0 ? warm : measured;
            List<Line> into = pass == 0 ? warmUpLines : lines;
            for (IdemSetting setting : settings) {
              boolean share = setting.id().equals(SHARE_ROW);
              String name = setting.id().toLowerCase(Locale.ROOT) + (pass == 0 ? "_warmup" : "");
              String topic = "bench_latency_" + suffix + "_" + name;
              String group = "bench-latency-" + suffix + "-" + name;
              kafka.createTopic(topic, options.partitions);
              try (KafkaFeed feed = new KafkaFeed(kafka, topic, group, KafkaEngine.NATIVE, options.stall);
                  KafkaProducer<byte[], byte[]> producer = kafka.producer(0)) {
                AtomicReference<Exception> sendFailure = new AtomicReference<>();
                into.add(measure(pass == 0 ? "kafka warm-up" : "kafka", setting, options, db, tables, workload, feed,
                    share
                        ? () -> await(() -> kafka.shareAssignedPartitions(group, topic) == options.partitions,
                            "the share group's assignment")
                        : () -> await(() -> kafka.assignedPartitions(group, topic) == options.partitions,
                            "the consumer group's assignment"),
                    i -> producer.send(KafkaEnv.record(topic, workload, i, System.nanoTime()), (m, e) -> {
                      if (e != null) {
                        sendFailure.compareAndSet(null, e);
                      }
                    }),
                    () -> {
                      producer.flush();
                      if (sendFailure.get() != null) {
                        throw sendFailure.get();
                      }
                    }));
              }
              kafka.deleteTopic(topic);
            }
          }
        }
      }
      if (options.rabbit) {
        try (RabbitEnv rabbit = new RabbitEnv(options.rabbitUri, options.rabbitQuorum)) {
          setup.add("rabbit: " + rabbit.version() + ", publisher confirms awaited at the end");
          for (int pass = options.warmup > 0 ? 0 : 1; pass < 2; pass++) {
            Workload workload = pass == 0 ? warm : measured;
            List<Line> into = pass == 0 ? warmUpLines : lines;
            for (IdemSetting setting : settings.stream().filter(setting -> !setting.id().equals(SHARE_ROW)).toList()) {
              String queue = "bench_latency_" + suffix + "_" + setting.id() + (pass == 0 ? "_warmup" : "");
              try (RabbitFeed feed = new RabbitFeed(rabbit, queue, null, options.stall);
                  Channel channel = rabbit.connection().createChannel()) {
                channel.confirmSelect();
                into.add(measure(pass == 0 ? "rabbit warm-up" : "rabbit", setting, options, db, tables, workload, feed,
                    () -> await(() -> rabbit.consumers(queue) == 1, "the consumer"),
                    i -> {
                      int event = workload.eventAt(i);
                      channel.basicPublish("", queue, RabbitEnv.properties(workload, event),
                          workload.payment(event, System.nanoTime()).encode());
                    },
                    () -> channel.waitForConfirmsOrDie(60_000)));
              }
            }
          }
        }
      }
    } finally {
      db.drop(tables);
    }
    System.out.println();
    System.out.printf(Locale.ROOT,
        "# Idem publish-to-settle latency at %,d msg/s for %d s (after %d s of warm-up), %d%% producer duplicates, %d accounts%n",
        options.rate, options.seconds, WARMUP_SECONDS, Math.round(options.duplicates * 100), options.accounts);
    System.out.println("# command: " + options.commandLine());
    System.out.println("# machine: " + Benchmark.machine(load) + "; PostgreSQL " + postgresVersion);
    setup.forEach(line -> System.out.println("# " + line));
    if (options.warmup > 0) {
      System.out.printf(Locale.ROOT,
          "# before the measured rows of each broker, the same rows ran on %,d other messages at the same rate (JIT warm-up)%n",
          options.warmup);
    }
    System.out
        .println("# latency: from the publisher's send (the time travels in the payload) to the outcome, emitted after the ack "
            + "(Kafka: offset marked; committed within the 1 s commit interval)");
    System.out.println();
    System.out.println(TABLE_HEADER);
    List<String> failed = new ArrayList<>();
    for (Line line : warmUpLines) {
      if (!line.failures().isEmpty()) {
        System.out.println("FAILED: " + line.broker() + " " + line.mode() + ": " + String.join("; ", line.failures()));
        failed.add(line.broker() + " " + line.mode());
      }
    }
    for (Line line : lines) {
      long[] s = line.sorted();
      TransactionTimes t = line.times();
      double tx = t == null ? -1 : t.meanMillis();
      String laneBound = tx > 0 && line.setting().maxBatchSize() == 1
          ? String.format(Locale.ROOT, "%,.0f", line.setting().concurrency() * 1000 / tx)
          : "-";
      System.out.printf(Locale.ROOT, "| %s | %s | %,.0f | %,d | %s | %s | %s | %s | %s | %s | %s | %s |%n", line.broker(),
          line.mode(), line.publishedPerSecond(), s.length,
          millis(percentile(s, 0.50)), millis(percentile(s, 0.99)), millis(s.length == 0 ? -1 : s[s.length - 1]),
          tx < 0 ? "-" : String.format(Locale.ROOT, "%.2f", tx), laneBound,
          t == null ? "-" : String.format(Locale.ROOT, "%.3f", t.cpuMillisPerMessage(s.length)),
          t == null || t.jitSeconds() < 0 ? "-" : String.format(Locale.ROOT, "%.1f", t.jitSeconds()),
          line.failures().isEmpty() ? "ok" : "FAILED: " + String.join("; ", line.failures()));
      if (!line.failures().isEmpty()) {
        failed.add(line.broker() + " " + line.mode());
      }
    }
    System.out.println();
    return Benchmark.verdict(failed, lines.isEmpty());
  }

  @FunctionalInterface
  private interface Step {
    void run() throws Exception;
  }

  @FunctionalInterface
  private interface Publish {
    void send(int position) throws Exception;
  }

  @FunctionalInterface
  private interface Condition {
    boolean holds() throws Exception;
  }

  private static Line measure(String broker, IdemSetting setting, Options options, Database db, Database.Tables tables,
      Workload workload,
      Feed feed, Step awaitConsumer, Publish publish, Step flush) {
    boolean loop = setting.id().equals(LOOP_ROW);
    String mode = setting.id() + " " + (loop ? LOOP_LABEL : setting.label());
    System.err.printf(Locale.ROOT, "[%s] latency %s ...%n", broker, mode);
    try {
      db.reset(tables, workload.accounts());
      long periodNanos = TimeUnit.SECONDS.toNanos(1) / options.rate;
      Progress progress = new Progress(workload.total(), workload.total(), Long.MAX_VALUE);
      long publishNanos;
      String settled;
      ConnectionPool pool = PostgresConnections.pool(db.r2dbcUrl(), setting.concurrency());
      TransactionTimes times = new TransactionTimes(); // the loop reports no transactions: CPU and JIT only
      AutoCloseable running = loop ? jdbcLoop(feed, db, tables, progress) : idem(setting, feed, pool, tables, progress, times);
      try {
        awaitConsumer.run();
        times.start();
        long start = System.nanoTime();
        progress.measureFrom(start + TimeUnit.SECONDS.toNanos(WARMUP_SECONDS));
        for (int i = 0; i < workload.total(); i++) {
          parkUntil(start + i * periodNanos);
          publish.send(i);
        }
        flush.run();
        publishNanos = System.nanoTime() - start;
        progress.await(options.stall);
        times.stop();
        settled = loop ? null : feed.settledOnBroker();
      } finally {
        running.close();
        pool.dispose();
      }
      String drained = settled != null ? settled : feed.drainedAfterStop();
      List<String> failures = Checker.failures(workload, new Checker.Observation(progress.settled(), progress.processed(),
          progress.duplicates(), progress.deadLettered(), -1, db.dedupRows(tables), db.balances(tables), drained == null,
          drained));
      double achieved = workload.total() / (publishNanos / 1e9);
      if (achieved < options.rate * 0.95) {
        System.err.printf(Locale.ROOT, "[%s] the publisher fell behind: %,.0f msg/s instead of %,d%n", broker, achieved,
            options.rate);
      }
      return new Line(broker, mode, achieved, progress.sortedLatencies(), failures, setting, times);
    } catch (Exception | AssertionError e) {
      e.printStackTrace();
      return new Line(broker, mode, 0, new long[0], List.of(e.toString()), setting, null);
    }
  }

  /** Idem with {@code setting} on the row's source (a share group for {@link #SHARE_ROW}); closing it stops the consumer and the source. */
  private static AutoCloseable idem(IdemSetting setting, Feed feed, ConnectionPool pool, Database.Tables tables,
      Progress progress,
      TransactionTimes times) {
    IdempotentConsumer<Payment> consumer = setting.consumer("idem-" + setting.id(), PostgresInbox.create(pool, tables.inbox()),
        tables.accounts(),
        times);
    Feed.Source source = setting.id().equals(SHARE_ROW)
        ? feed.shareSource(setting.prefetch(), 1)
        : feed.idemSource(setting.prefetch());
    Disposable running = consumer.process(source.deliveries().doOnNext(d -> progress.received()))
        .subscribe(progress::settled, progress::failed);
    return () -> {
      running.dispose();
      source.close();
    };
  }

  /**
   * Row {@value #LOOP_ROW}: the blocking JDBC loop of throughput row 3 on a thread of its own (one
   * transaction per poll, then the poll's offsets or one multiple ack); it ends once every message
   * settled, and closing waits for it.
   */
  private static AutoCloseable jdbcLoop(Feed feed, Database db, Database.Tables tables, Progress progress) {
    Thread thread = new Thread(() -> {
      try (PollWriter writer = PollWriter.jdbc(db, tables)) {
        feed.perPoll(progress, writer);
      } catch (Exception e) {
        progress.failed(e);
      }
    }, "jdbc-loop");
    thread.start();
    return () -> {
      thread.join(TimeUnit.SECONDS.toMillis(60));
      if (thread.isAlive()) {
        thread.interrupt();
      }
    };
  }

  static void await(Condition condition, String what) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!condition.holds()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("waited 60 s for " + what);
      }
      Thread.sleep(50);
    }
  }

  static long percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return -1;
    }
    int index = (int) Math.ceil(p * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
  }

  static String millis(long nanos) {
    return nanos < 0 ? "-" : String.format(Locale.ROOT, "%.1f", nanos / 1e6);
  }

  static void parkUntil(long deadlineNanos) {
    long wait;
    while ((wait = deadlineNanos - System.nanoTime()) > 0) {
      LockSupport.parkNanos(wait);
    }
  }

}
