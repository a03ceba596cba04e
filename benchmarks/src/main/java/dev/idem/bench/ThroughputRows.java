package dev.idem.bench;

import dev.idem.ConsumerMetrics;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.KafkaEngine;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import reactor.core.Disposable;

/**
 * The rows of one broker, in order, on the same workload: each on a fresh feed (consumer group or
 * queue) and fresh tables, each checked.
 */
final class ThroughputRows {

  /** How a row gets its feed: a consumer group on the shared topic, or a filled queue (which ignores the Kafka engine). */
  @FunctionalInterface
  interface FeedFactory {
    Feed open(String rowId, KafkaEngine engine) throws Exception;
  }

  /** The id suffix of a row through the adapter on {@link KafkaEngine#REACTOR_KAFKA}, e.g. {@code 4b-rk}. */
  static final String REACTOR_KAFKA_SUFFIX = "-rk";

  static String suffix(KafkaEngine engine) {
    return engine == KafkaEngine.REACTOR_KAFKA ? REACTOR_KAFKA_SUFFIX : "";
  }

  private final String broker;
  private final String label;
  private final Options options;
  private final Database db;
  private final Database.Tables tables;
  private final Workload workload;
  private final FeedFactory feeds;
  private final List<KafkaEngine> engines;

  /** {@code engines}: the rows through the adapter (1b, 4a-5d) run once per engine; RabbitMQ passes one, which it ignores. */
  ThroughputRows(String broker, String label, Options options, Database db, Database.Tables tables, Workload workload, FeedFactory feeds,
      List<KafkaEngine> engines) {
    this.broker = broker;
    this.label = label;
    this.options = options;
    this.db = db;
    this.tables = tables;
    this.workload = workload;
    this.feeds = feeds;
    this.engines = engines;
  }

  List<RowResult> run() {
    List<RowResult> results = new ArrayList<>();
    KafkaEngine none = KafkaEngine.NATIVE;
    row(results, "1", "broker only: consume + commit/ack, no database", RowResult.Kind.BROKER, none, this::brokerOnly);
    engineRows(results, "1b", "Idem adapter only: receive + ack, no database", RowResult.Kind.ADAPTER, this::adapterOnly);
    row(results, "2", "JDBC loop, 1 transaction per message", RowResult.Kind.JDBC_MESSAGE, none, feed -> jdbc(feed, false));
    row(results, "3", "JDBC loop, 1 transaction per poll (JDBC batch)", RowResult.Kind.JDBC_POLL, none, feed -> jdbc(feed, true));
    for (IdemSetting setting : IdemSetting.throughputRows()) {
      engineRows(results, setting.id(), setting.label(), RowResult.Kind.IDEM, feed -> idem(feed, setting, 0));
    }
    if (broker.equals("kafka")) {
      shareRows(results);
    }
    return results;
  }

  /**
   * Kafka share groups against a consumer group on the same topic, all with the defaults but
   * {@code UNORDERED} (the only order a share group keeps) and the set-based handler: 6a reads
   * through a consumer group, 6b through a share group with one share consumer, 6c with
   * {@value #MANY_SHARE_CONSUMERS}, more consumers than the topic has partitions (4 by default).
   */
  private void shareRows(List<RowResult> results) {
    IdemSetting setting = IdemSetting.defaults("6").withOrdering(Ordering.UNORDERED).withBatchHandler();
    KafkaEngine engine = KafkaEngine.NATIVE;
    row(results, "6a", setting.label() + ", consumer group", RowResult.Kind.IDEM, engine, feed -> idem(feed, setting, 0));
    row(results, "6b", setting.label() + ", share group, 1 share consumer", RowResult.Kind.IDEM, engine, feed -> idem(feed, setting, 1));
    row(results, "6c", setting.label() + ", share group, " + MANY_SHARE_CONSUMERS + " share consumers", RowResult.Kind.IDEM, engine,
        feed -> idem(feed, setting, MANY_SHARE_CONSUMERS));
  }

  /** Share consumers in row 6c: twice the default partition count. */
  static final int MANY_SHARE_CONSUMERS = 8;

  /** What a row measured and what its check observed. */
  private record Measured(Progress progress, Checker.Observation observation) {}

  @FunctionalInterface
  private interface RowBody {
    Measured run(Feed feed) throws Exception;
  }

  /**
   * A row through the adapter, once per engine. With two engines, an untimed settling round on the
   * same workload (each engine once, results only on standard error) comes first, then
   * {@code -DengineRounds} timed rounds (default 2), the engines' order reversed every other round
   * (native, Reactor Kafka, then Reactor Kafka, native); each engine's row reports its timed rounds
   * together (messages over time, CPU over messages). Measured why: in one JVM, whichever row ran
   * first was the slowest by far even after the warm-up pass (5d: 19,435 msg/s first, then 28,438 to
   * 43,904 in the seven rows after it, either engine), which in a single round decided the
   * comparison by the order the engines ran in.
   */
  private void engineRows(List<RowResult> results, String baseId, String baseName, RowResult.Kind kind, RowBody body) {
    List<KafkaEngine> asked = engines.stream().filter(e -> options.runs(baseId, e)).toList();
    if (asked.size() < 2) {
      asked.forEach(engine -> row(results, baseId, baseName, kind, engine, body));
      return;
    }
    for (KafkaEngine engine : asked) {
      measure(baseId + suffix(engine) + "-settling", baseId, baseName + " (untimed settling round)", kind, engine, body);
    }
    Map<KafkaEngine, List<RowResult>> byEngine = new EnumMap<>(KafkaEngine.class);
    for (int round = 0; round < options.engineRounds; round++) {
      List<KafkaEngine> order = new ArrayList<>(asked);
      if (round % 2 == 1) {
        Collections.reverse(order);
      }
      for (KafkaEngine engine : order) {
        String feedId = baseId + suffix(engine) + "-round" + (round + 1);
        byEngine.computeIfAbsent(engine, e -> new ArrayList<>()).add(measure(feedId, baseId, baseName, kind, engine, body));
      }
    }
    for (KafkaEngine engine : asked) {
      results.add(RowResult.combined(byEngine.get(engine)));
    }
  }

  private void row(List<RowResult> results, String baseId, String baseName, RowResult.Kind kind, KafkaEngine engine, RowBody body) {
    if (options.runs(baseId, engine)) {
      results.add(measure(baseId + suffix(engine), baseId, baseName, kind, engine, body));
    }
  }

  private RowResult measure(String feedId, String baseId, String baseName, RowResult.Kind kind, KafkaEngine engine, RowBody body) {
    String id = baseId + suffix(engine);
    String name = baseName + (engine == KafkaEngine.REACTOR_KAFKA ? " (Reactor Kafka)" : "");
    System.err.printf(Locale.ROOT, "[%s] row %s %s ...%n", label, feedId, name);
    RowResult result;
    try (Feed feed = feeds.open(feedId, engine)) {
      ThreadCpu profile = ThreadCpu.startIfEnabled();
      Measured measured = body.run(feed);
      if (profile != null) {
        profile.print(label + " " + id);
      }
      Progress p = measured.progress();
      result = new RowResult(broker, id, name, kind, p.settled(), p.nanos(), p.cpuNanos(), Checker.failures(workload, measured.observation()));
    } catch (Exception | AssertionError e) {
      result = RowResult.failed(broker, id, name, kind, e.toString());
      e.printStackTrace();
    }
    System.err.printf(Locale.ROOT, "[%s] row %s: %,.0f msg/s, %.3f CPU s/1k msg, %s%n", label, feedId, result.messagesPerSecond(),
        result.cpuSecondsPerThousand(), result.ok() ? "ok" : "FAILED " + result.failures());
    return result;
  }

  private Measured brokerOnly(Feed feed) throws Exception {
    Progress progress = new Progress(workload.total());
    Set<String> ids = new java.util.HashSet<>();
    feed.brokerOnly(progress, ids);
    String broker = feed.drainedAfterStop();
    return new Measured(progress, new Checker.Observation(progress.settled(), -1, -1, 0, ids.size(), -1, null, broker == null, broker));
  }

  private Measured adapterOnly(Feed feed) throws Exception {
    Progress progress = new Progress(workload.total());
    Set<String> ids = ConcurrentHashMap.newKeySet();
    String settled;
    try (Feed.Source source = feed.idemSource(256)) {
      Disposable running = source.deliveries()
          .doOnNext(d -> progress.received())
          .flatMap(d -> d.ack().thenReturn(d.id()), 256)
          .subscribe(id -> {
            ids.add(id);
            progress.settledOne();
          }, progress::failed);
      try {
        progress.await(options.stall);
        settled = feed.settledOnBroker();
      } finally {
        running.dispose();
      }
    }
    String drained = settled != null ? settled : feed.drainedAfterStop();
    return new Measured(progress, new Checker.Observation(progress.settled(), -1, -1, 0, ids.size(), -1, null, drained == null, drained));
  }

  private Measured jdbc(Feed feed, boolean perPoll) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    if (perPoll) {
      feed.jdbcPerPoll(progress, db, tables);
    } else {
      feed.jdbcPerMessage(progress, db, tables);
    }
    String drained = feed.drainedAfterStop();
    return new Measured(progress, observe(progress, drained));
  }

  /** {@code shareConsumers}: 0 reads through the row's consumer group, more through a share group with that many consumers. */
  private Measured idem(Feed feed, IdemSetting setting, int shareConsumers) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    BatchSizes batches = new BatchSizes();
    ConnectionPool pool = PostgresConnections.pool(db.r2dbcUrl(), setting.concurrency());
    String settled;
    try {
      IdempotentConsumer<Payment> consumer = setting.consumer("idem-" + setting.id(), PostgresInbox.create(pool, tables.inbox()), tables.accounts(),
          batches);
      try (Feed.Source source = shareConsumers == 0 ? feed.idemSource(setting.prefetch())
          : feed.shareSource(setting.prefetch(), shareConsumers)) {
        Disposable running = consumer.process(source.deliveries().doOnNext(d -> progress.received()))
            .subscribe(progress::settled, progress::failed);
        try {
          progress.await(options.stall);
          settled = feed.settledOnBroker();
        } finally {
          running.dispose();
        }
      }
    } finally {
      pool.dispose();
    }
    String drained = settled != null ? settled : feed.drainedAfterStop();
    System.err.printf(Locale.ROOT, "[%s] row %s: %s%n", label, setting.id(), batches);
    return new Measured(progress, observe(progress, drained));
  }

  /** Counts the micro-batches the lanes formed, to print their mean size. */
  private static final class BatchSizes implements ConsumerMetrics {
    private final LongAdder batches = new LongAdder();
    private final LongAdder messages = new LongAdder();

    @Override
    public void batch(int size) {
      batches.increment();
      messages.add(size);
    }

    @Override
    public String toString() {
      long n = batches.sum();
      return String.format(Locale.ROOT, "%,d batches, %.1f messages each on average", n, n == 0 ? 0.0 : (double) messages.sum() / n);
    }
  }

  private Checker.Observation observe(Progress progress, String brokerProblem) throws Exception {
    return new Checker.Observation(progress.settled(), progress.processed(), progress.duplicates(), progress.deadLettered(), -1,
        db.dedupRows(tables), db.balances(tables), brokerProblem == null, brokerProblem);
  }
}
