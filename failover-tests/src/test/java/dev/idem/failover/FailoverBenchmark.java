package dev.idem.failover;

import dev.idem.BatchHandler;
import dev.idem.BatchItem;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.failover.Endpoint.Broker;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.awaitility.Awaitility;
import reactor.core.Disposable;

/**
 * The switch benchmark (issue 35, item 5): a consumer with Idem's defaults on a pg_auto_failover
 * formation ({@link Formation}), fed at a steady rate, through one planned switch
 * ({@code pg_autoctl perform failover}). It prints, second by second from the trigger, the messages
 * published and settled (each settled message's transaction committed on the primary) and the
 * backlog, then the figures: the steady throughput before the switch, how long nothing settled,
 * when the new primary answered and the first message settled on it, the catch-up throughput, and
 * the recovery time (from the trigger until the backlog is back to what it was before the switch).
 * Last, it checks that every message was applied exactly once.
 *
 * <pre>
 * mvn -q -pl failover-tests -am package -DskipTests exec:java -Dbroker=kafka -Dstyle=handler -Drate=500
 * </pre>
 *
 * <p>System properties: {@code broker} ({@code kafka}, the default, or {@code rabbit}),
 * {@code style} ({@code handler}: a per-message {@code Handler} with the default batching;
 * {@code batch}: a {@code BatchHandler}; {@code per-message}: {@code maxBatchSize(1)}), {@code rate}
 * (messages per second, 500), {@code before} and {@code after} (seconds measured around the
 * switch, 20 and 40), {@code warmup} (seconds, 10), {@code infraMaxBackoff} (the longest wait
 * between retries of an infrastructure error, default Idem's 5 s).
 */
public final class FailoverBenchmark {

  private static final int MAX_SECONDS = 600;

  private FailoverBenchmark() {}

  /**
   * Runs it.
   *
   * @param args ignored; see the system properties
   * @throws Exception when it fails
   */
  public static void main(String[] args) throws Exception {
    Broker broker = System.getProperty("broker", "kafka").toLowerCase(Locale.ROOT).startsWith("rabbit")
        ? Broker.RABBITMQ
        : Broker.KAFKA;
    String style = System.getProperty("style", "handler");
    int rate = Integer.getInteger("rate", 500);
    int warmup = Integer.getInteger("warmup", 10);
    int before = Integer.getInteger("before", 20);
    int after = Integer.getInteger("after", 40);
    Duration infraMaxBackoff = Duration.parse("PT" + System.getProperty("infraMaxBackoff", "5s").toUpperCase(Locale.ROOT));
    String command = "mvn -q -pl failover-tests -am package -DskipTests exec:java -Dbroker="
        + broker.name().toLowerCase(Locale.ROOT)
        + " -Dstyle=" + style + " -Drate=" + rate + " -Dwarmup=" + warmup + " -Dbefore=" + before + " -Dafter=" + after
        + (System.getProperty("infraMaxBackoff") == null ? "" : " -DinfraMaxBackoff=" + System.getProperty("infraMaxBackoff"));

    Formation formation = Formation.get();
    formation.awaitHealthy();
    String name = PostgresService.uniqueName("failover_bench");
    String table = name + "_effects";
    Formation.query(formation.failoverUrl(), "CREATE TABLE " + table + " (message_id text NOT NULL, amount bigint NOT NULL)");
    ConnectionPool pool = PostgresConnections.pool(formation.failoverUrl(), 8);
    PostgresInbox inbox = PostgresInbox.create(pool, name + "_inbox");
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
    Endpoint endpoint = broker.open(name);

    IdempotentConsumer.Builder<String> builder = IdempotentConsumer.<String>named(name).inbox(inbox)
        .retry(RetryPolicy.defaults().withInfrastructureBackoff(RetryPolicy.DEFAULT_FIRST_BACKOFF, infraMaxBackoff));
    String insert = "INSERT INTO " + table + " (message_id, amount) VALUES ($1, $2)";
    Handler<String> handler = (payload, tx) -> tx.sql(insert).bind(0, tx.messageId()).bind(1, Long.parseLong(payload)).execute();
    switch (style) {
      case "handler" -> builder.handler(handler);
      case "per-message" -> builder.handler(handler).maxBatchSize(1);
      case "batch" -> builder.batchHandler((BatchHandler<String>) (items, tx) -> tx.sql(
          "INSERT INTO " + table + " (message_id, amount) SELECT * FROM unnest($1::text[], $2::bigint[])")
          .bind(0, items.stream().map(BatchItem::messageId).toArray(String[]::new))
          .bind(1, items.stream().map(i -> Long.valueOf(i.payload())).toArray(Long[]::new)).execute());
      default -> throw new IllegalArgumentException("-Dstyle=" + style + ": use handler, batch or per-message");
    }
    IdempotentConsumer<String> consumer = builder.build();

    long start = System.nanoTime();
    AtomicLongArray settledPerSecond = new AtomicLongArray(MAX_SECONDS);
    AtomicLongArray publishedPerSecond = new AtomicLongArray(MAX_SECONDS);
    AtomicLong settled = new AtomicLong();
    AtomicLong published = new AtomicLong();
    // When each message settled (System.nanoTime()), in the order the outcomes arrived.
    long[] settledAt = new long[(int) Math.min(4_000_000L, (long) rate * (warmup + before + after + 300))];
    Disposable running = endpoint.receive().transform(consumer::process).subscribe(o -> {
      long now = System.nanoTime();
      if (o.status() != Outcome.Status.DEAD_LETTERED) {
        settledPerSecond.incrementAndGet(second(start, now));
        long n = settled.getAndIncrement();
        if (n < settledAt.length) {
          settledAt[(int) n] = now;
        }
      }
    }, e -> System.err.println("the pipeline failed: " + e));

    // The feed: every 10 ms, what the rate owes since the start, in one publish. It stops on a flag,
    // not an interrupt: an interrupt inside a publish that already reached the broker left those
    // messages uncounted (the Kafka run reported 6 more effect rows than it had published).
    AtomicBoolean feeding = new AtomicBoolean(true);
    Thread feeder = new Thread(() -> {
      while (feeding.get()) {
        long now = System.nanoTime();
        long owed = (long) ((now - start) / 1e9 * rate) - published.get();
        if (owed > 0) {
          List<Endpoint.Message> batch = new ArrayList<>();
          for (long i = 0; i < owed; i++) {
            long n = published.get() + i + 1;
            batch.add(new Endpoint.Message("p-" + n, "account-" + n % 64, Long.toString(n % 1000)));
          }
          endpoint.publish(batch);
          published.addAndGet(owed);
          publishedPerSecond.addAndGet(second(start, now), owed);
        }
        try {
          Thread.sleep(10);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "failover-bench-feed");
    feeder.start();

    // The backlog (published, not settled), sampled every 100 ms.
    long[] backlog = new long[MAX_SECONDS * 10];
    Thread sampler = new Thread(() -> {
      for (int i = 0; i < backlog.length && !Thread.currentThread().isInterrupted(); i++) {
        backlog[i] = published.get() - settled.get();
        try {
          Thread.sleep(Math.max(0, (start + (i + 1) * 100_000_000L - System.nanoTime()) / 1_000_000));
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "failover-bench-backlog");
    sampler.setDaemon(true);
    sampler.start();

    Thread.sleep((warmup + before) * 1000L);
    String oldPrimary = formation.primary();
    long triggered = System.nanoTime();
    CompletableFuture<Long> newPrimary = CompletableFuture.supplyAsync(() -> {
      Awaitility.await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(50))
          .until(() -> formation.writableOtherThan(oldPrimary).isPresent());
      return System.nanoTime();
    });
    formation.performFailover();
    long promoted = newPrimary.get();
    Thread.sleep(Math.max(0, triggered + after * 1_000_000_000L - System.nanoTime()) / 1_000_000);
    feeding.set(false);
    feeder.join();
    long end = System.nanoTime();
    Awaitility.await("the backlog drained").atMost(Duration.ofSeconds(120)).until(() -> settled.get() >= published.get());
    sampler.interrupt();
    running.dispose();
    long firstAfter = Long.MAX_VALUE;
    for (int i = 0; i < Math.min(settled.get(), settledAt.length); i++) {
      if (settledAt[i] >= promoted) {
        firstAfter = Math.min(firstAfter, settledAt[i]);
      }
    }

    int triggerSecond = second(start, triggered);
    int lastSecond = Math.min(second(start, end), MAX_SECONDS - 1);
    System.out.println();
    System.out.println("second from the trigger | published | settled | backlog at the second's end");
    for (int s = warmup; s < lastSecond; s++) {
      System.out.printf("%+4d | %6d | %6d | %6d%n", s - triggerSecond, publishedPerSecond.get(s), settledPerSecond.get(s),
          backlog[Math.min(backlog.length - 1, (s + 1) * 10 - 1)]);
    }
    long settledBefore = 0;
    long maxBacklogBefore = 0;
    for (int s = warmup; s < triggerSecond; s++) {
      settledBefore += settledPerSecond.get(s);
    }
    for (int i = warmup * 10; i < triggerSecond * 10; i++) {
      maxBacklogBefore = Math.max(maxBacklogBefore, backlog[i]);
    }
    int zeroSeconds = 0;
    long peak = 0;
    for (int s = triggerSecond; s < lastSecond; s++) {
      if (settledPerSecond.get(s) == 0) {
        zeroSeconds++;
      }
      peak = Math.max(peak, settledPerSecond.get(s));
    }
    long peakBacklog = 0;
    double recovered = Double.NaN;
    int firstAfterSample = (int) ((firstAfter - start) / 100_000_000L);
    for (int i = triggerSecond * 10; i < Math.min(backlog.length, second(start, end) * 10); i++) {
      peakBacklog = Math.max(peakBacklog, backlog[i]);
      if (i > firstAfterSample && backlog[i] <= maxBacklogBefore && Double.isNaN(recovered)) {
        recovered = (start + (i + 1) * 100_000_000L - triggered) / 1e9;
      }
    }
    long rows = Long.parseLong(Formation.query(formation.failoverUrl(), "SELECT count(*)::text FROM " + table));
    long distinct = Long
        .parseLong(Formation.query(formation.failoverUrl(), "SELECT count(DISTINCT message_id)::text FROM " + table));

    System.out.println();
    System.out.println("command: " + command);
    System.out.printf("broker %s, style %s, %d msg/s offered, Idem's defaults (concurrency %d, batches of up to %d), "
        + "infrastructure backoff up to %s%n", broker, style, rate, IdempotentConsumer.DEFAULT_CONCURRENCY,
        style.equals("per-message") ? 1 : IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, infraMaxBackoff);
    System.out.printf("before the switch: %.0f msg/s settled over %d s, backlog at most %d%n",
        settledBefore / (double) Math.max(1, triggerSecond - warmup), triggerSecond - warmup, maxBacklogBefore);
    System.out.printf(
        "switch: new primary writable %.2f s after the trigger; first message settled on it %.2f s after the trigger "
            + "(%.2f s after it answered); %d whole second(s) with nothing settled%n",
        (promoted - triggered) / 1e9,
        (firstAfter - triggered) / 1e9, (firstAfter - promoted) / 1e9, zeroSeconds);
    System.out
        .printf("after: catch-up peak %d msg/s, backlog peak %d (%.1f s of traffic); recovered (backlog back to %d) %.2f s after "
            + "the trigger%n", peak, peakBacklog, peakBacklog / (double) rate, maxBacklogBefore, recovered);
    System.out.printf("exactly once: %d published, %d settled, %d effect rows, %d distinct ids: %s%n", published.get(),
        settled.get(),
        rows, distinct, rows == published.get() && distinct == rows ? "OK" : "FAILED");

    endpoint.close();
    pool.dispose();
    Formation.query(formation.failoverUrl(), "DROP TABLE IF EXISTS " + table + ", " + inbox.table());
    System.exit(rows == published.get() && distinct == rows ? 0 : 1);
  }

  private static int second(long start, long now) {
    return (int) Math.min(MAX_SECONDS - 1, (now - start) / 1_000_000_000L);
  }
}
