package dev.idem.bench;

import com.sun.management.GarbageCollectionNotificationInfo;
import dev.idem.IdempotentConsumer;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.io.IOException;
import java.io.Writer;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.stream.Collectors;
import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;
import reactor.core.Disposable;

/**
 * The memory mode's consumer, in a JVM of its own with a small heap: drains the backlog with
 * Idem's default settings (KafkaSource defaults, {@code IdempotentConsumer} defaults, a pool of
 * {@link PostgresConnections#DEFAULT_POOL_SIZE}) and records the heap in use after every garbage
 * collection (GC notifications, heap pools only). Writes its results as properties to the file
 * named by its last argument.
 */
public final class MemoryDrain {

  private MemoryDrain() {}

  /**
   * Drains the backlog.
   *
   * @param args bootstrap servers, topic, group, R2DBC URL, dedup table, accounts table, messages, stall seconds, result file
   * @throws Exception when the drain cannot be set up or the result cannot be written
   */
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    String r2dbcUrl = args[3];
    String inbox = args[4];
    String accounts = args[5];
    long total = Long.parseLong(args[6]);
    Duration stall = Duration.ofSeconds(Long.parseLong(args[7]));
    Path resultFile = Path.of(args[8]);

    AtomicLong peak = new AtomicLong();
    AtomicLong collections = new AtomicLong();
    AtomicLongArray decilePeaks = new AtomicLongArray(10);
    AtomicLong settledNow = new AtomicLong();
    listenToCollections(peak, collections, decilePeaks, settledNow, total);

    Properties result = new Properties();
    Progress progress = new Progress(total);
    ConnectionPool pool = PostgresConnections.pool(r2dbcUrl, PostgresConnections.DEFAULT_POOL_SIZE);
    KafkaSource<Payment> source = KafkaSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers(bootstrap).groupId(group).topics(topic).valueDeserializer(new Payment.KafkaDeserializer()).build());
    IdempotentConsumer<Payment> consumer = IdempotentConsumer.<Payment>named("idem-memory")
        .inbox(PostgresInbox.create(pool, inbox)).handler(IdemSetting.credit(accounts)).build();
    long tenth = Math.max(1, total / 10);
    Disposable running = consumer.process(source.receive().doOnNext(d -> progress.received()))
        .subscribe(outcome -> {
          progress.settled(outcome);
          long n = settledNow.incrementAndGet();
          if (n % tenth == 0 && n / tenth <= 10) {
            System.err.printf(Locale.ROOT, "[memory] %,d of %,d settled; peak heap after GC so far %.1f MB over %d GCs%n",
                n, total, peak.get() / 1048576.0, collections.get());
          }
        }, progress::failed);
    try {
      progress.await(stall);
      // let the periodic commit (1 s) reach the end before cancelling, which commits too
      Thread.sleep(2_000);
    } catch (IllegalStateException e) {
      result.setProperty("error", e.getMessage());
    } finally {
      running.dispose();
      source.close();
      pool.dispose();
    }
    System.gc();
    long liveAfterFullGc = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();

    result.setProperty("settled", Long.toString(progress.settled()));
    result.setProperty("processed", Long.toString(progress.processed()));
    result.setProperty("duplicates", Long.toString(progress.duplicates()));
    result.setProperty("deadLettered", Long.toString(progress.deadLettered()));
    result.setProperty("nanos", Long.toString(progress.nanos()));
    result.setProperty("cpuNanos", Long.toString(progress.cpuNanos()));
    result.setProperty("peakHeapAfterGc", Long.toString(peak.get()));
    result.setProperty("collections", Long.toString(collections.get()));
    result.setProperty("liveHeapAfterFullGcAtEnd", Long.toString(liveAfterFullGc));
    result.setProperty("maxHeap", Long.toString(Runtime.getRuntime().maxMemory()));
    StringBuilder deciles = new StringBuilder();
    for (int i = 0; i < 10; i++) {
      deciles.append(i == 0 ? "" : ",").append(decilePeaks.get(i));
    }
    result.setProperty("decilePeaks", deciles.toString());
    try (Writer out = Files.newBufferedWriter(resultFile, StandardCharsets.UTF_8)) {
      result.store(out, "idem memory drain");
    } catch (IOException e) {
      throw new IOException("could not write " + resultFile, e);
    }
    System.exit(0);
  }

  private static void listenToCollections(AtomicLong peak, AtomicLong collections, AtomicLongArray decilePeaks,
      AtomicLong settled, long total) {
    Set<String> heapPools = ManagementFactory.getMemoryPoolMXBeans().stream()
        .filter(pool -> pool.getType() == MemoryType.HEAP).map(MemoryPoolMXBean::getName).collect(Collectors.toSet());
    for (GarbageCollectorMXBean collector : ManagementFactory.getGarbageCollectorMXBeans()) {
      ((NotificationEmitter) collector).addNotificationListener((notification, handback) -> {
        if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(notification.getType())) {
          return;
        }
        GarbageCollectionNotificationInfo info = GarbageCollectionNotificationInfo
            .from((CompositeData) notification.getUserData());
        long used = info.getGcInfo().getMemoryUsageAfterGc().entrySet().stream()
            .filter(e -> heapPools.contains(e.getKey())).mapToLong(e -> e.getValue().getUsed()).sum();
        peak.accumulateAndGet(used, Math::max);
        collections.incrementAndGet();
        int decile = (int) Math.min(9, settled.get() * 10 / Math.max(1, total));
        decilePeaks.accumulateAndGet(decile, used, Math::max);
      }, null, null);
    }
  }
}
