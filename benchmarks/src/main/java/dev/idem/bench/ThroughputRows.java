package dev.idem.bench;

import dev.idem.ConsumerMetrics;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.KafkaEngine;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
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
  private final int rounds;
  private final long brokerPid;

  /**
   * {@code engines}: the rows through the adapter (1b, 4a-5d) run once per engine; RabbitMQ passes
   * one, which it ignores. {@code rounds}: how often each row runs, in the table's order and then
   * reversed, alternately; each row reports its median round. {@code brokerPid}: the local broker
   * process whose CPU each row reports, or -1.
   */
  ThroughputRows(String broker, String label, Options options, Database db, Database.Tables tables, Workload workload,
      FeedFactory feeds,
      List<KafkaEngine> engines, int rounds, long brokerPid) {
    this.broker = broker;
    this.label = label;
    this.options = options;
    this.db = db;
    this.tables = tables;
    this.workload = workload;
    this.feeds = feeds;
    this.engines = engines;
    this.rounds = rounds;
    this.brokerPid = brokerPid;
  }

  List<RowResult> run() {
    List<Spec> specs = specs();
    Map<String, List<RowResult>> rounds = new LinkedHashMap<>();
    for (int round = 1; round <= this.rounds; round++) {
      List<Spec> order = new ArrayList<>(specs);
      if (round % 2 == 0) {
        Collections.reverse(order);
      }
      for (Spec spec : order) {
        String feedId = spec.id() + (this.rounds > 1 ? "-round" + round : "");
        rounds.computeIfAbsent(spec.id(), id -> new ArrayList<>()).add(measure(feedId, spec));
      }
    }
    return specs.stream().map(spec -> RowResult.median(rounds.get(spec.id()))).toList();
  }

  /** One row of the table: what it runs, on which Kafka engine. */
  private record Spec(String baseId, String name, RowResult.Kind kind, KafkaEngine engine, RowBody body) {
    String id() {
      return baseId + suffix(engine);
    }
  }

  /** The rows asked for, in the table's order; the rows through the adapter once per engine. */
  private List<Spec> specs() {
    List<Spec> specs = new ArrayList<>();
    KafkaEngine none = KafkaEngine.NATIVE;
    add(specs, "0", "database alone: the set-based SQL from memory, 1 JDBC writer, " + DATABASE_BATCH + "-row transactions",
        RowResult.Kind.DATABASE, none, feed -> databaseAlone());
    add(specs, "1", "broker only: consume + commit/ack, no database", RowResult.Kind.BROKER, none, this::brokerOnly);
    for (KafkaEngine engine : engines) {
      add(specs, "1b", "Idem adapter only: receive + ack, no database", RowResult.Kind.ADAPTER, engine, this::adapterOnly);
    }
    add(specs, "2", "JDBC loop, 1 transaction per message", RowResult.Kind.JDBC_MESSAGE, none, feed -> jdbc(feed, false));
    add(specs, "3", "JDBC loop, 1 transaction per poll (JDBC batch)", RowResult.Kind.JDBC_POLL, none, feed -> jdbc(feed, true));
    add(specs, "3b", "R2DBC loop, per message: 1 transaction per poll, 1 UPDATE per message", RowResult.Kind.R2DBC_MESSAGE, none,
        feed -> r2dbc(feed, false));
    add(specs, "3c", "R2DBC loop, set-based: 1 transaction per poll, 1 UPDATE of the per-account sums", RowResult.Kind.R2DBC_SET,
        none,
        feed -> r2dbc(feed, true));
    String spring = broker.equals("kafka") ? "Spring Kafka" : "Spring AMQP";
    add(specs, "2s",
        spring + " listener, 1 JDBC transaction per record (TransactionTemplate, as @Transactional), container defaults",
        RowResult.Kind.SPRING_RECORD, none, feed -> spring(feed, false));
    if (broker.equals("kafka")) {
      add(specs, "2p", "Parallel Consumer, KEY order, " + PARALLEL_CONSUMER_THREADS + " threads, 1 JDBC transaction per record",
          RowResult.Kind.PARALLEL_CONSUMER, none, this::parallelConsumer);
      add(specs, "3s", "Spring Kafka batch listener, 1 JDBC transaction per poll, container defaults", RowResult.Kind.SPRING_POLL,
          none,
          feed -> spring(feed, true));
    }
    for (IdemSetting setting : IdemSetting.throughputRows()) {
      for (KafkaEngine engine : engines) {
        add(specs, setting.id(), setting.label(), RowResult.Kind.IDEM, engine, feed -> idem(feed, setting, 0));
      }
    }
    if (broker.equals("kafka")) {
      IdemSetting setting = IdemSetting.defaults("6").withOrdering(Ordering.UNORDERED).withBatchHandler();
      add(specs, "6a", setting.label() + ", consumer group", RowResult.Kind.IDEM, none, feed -> idem(feed, setting, 0));
      add(specs, "6b", setting.label() + ", share group, 1 share consumer", RowResult.Kind.IDEM, none,
          feed -> idem(feed, setting, 1));
      add(specs, "6c", setting.label() + ", share group, " + MANY_SHARE_CONSUMERS + " share consumers", RowResult.Kind.IDEM, none,
          feed -> idem(feed, setting, MANY_SHARE_CONSUMERS));
    }
    return specs;
  }

  private void add(List<Spec> specs, String baseId, String name, RowResult.Kind kind, KafkaEngine engine, RowBody body) {
    if (options.runs(baseId, engine)) {
      specs.add(new Spec(baseId, name + (engine == KafkaEngine.REACTOR_KAFKA ? " (Reactor Kafka)" : ""), kind, engine, body));
    }
  }

  /**
   * Share consumers in row 6c: twice the default partition count. Rows 6a-6c compare a share group
   * with a consumer group on the same topic, all with the defaults but {@code UNORDERED} (the only
   * order a share group keeps) and the set-based handler.
   */
  static final int MANY_SHARE_CONSUMERS = 8;
  /** Parallel Consumer's threads in row 2p: its default {@code maxConcurrency}. */
  static final int PARALLEL_CONSUMER_THREADS = 16;
  /** Row 0's transaction size: the JDBC loops' poll size. */
  static final int DATABASE_BATCH = 500;

  /** What a row measured and what its check observed. */
  private record Measured(Progress progress, Checker.Observation observation, long batches, long settleFrames) {
    Measured(Progress progress, Checker.Observation observation) {
      this(progress, observation, -1, -1);
    }
  }

  @FunctionalInterface
  private interface RowBody {
    Measured run(Feed feed) throws Exception;
  }

  private RowResult measure(String feedId, Spec spec) {
    String id = spec.id();
    String name = spec.name();
    KafkaEngine engine = spec.engine();
    RowBody body = spec.body();
    RowResult.Kind kind = spec.kind();
    System.err.printf(Locale.ROOT, "[%s] row %s %s ...%n", label, feedId, name);
    RowResult result;
    try (Feed feed = feeds.open(feedId, engine)) {
      ThreadCpu profile = ThreadCpu.startIfEnabled();
      long brokerCpu = ProcessCpu.nanos(brokerPid);
      long databaseCpu = ProcessCpu.postgresNanos();
      Measured measured = body.run(feed);
      long brokerCpuAfter = ProcessCpu.nanos(brokerPid);
      long databaseCpuAfter = ProcessCpu.postgresNanos();
      if (profile != null) {
        profile.print(label + " " + id);
      }
      Progress p = measured.progress();
      result = new RowResult(broker, id, name, kind, p.settled(), p.nanos(), p.cpuNanos(),
          Checker.failures(workload, measured.observation()),
          measured.batches(), brokerCpu < 0 || brokerCpuAfter < 0 ? -1 : brokerCpuAfter - brokerCpu, measured.settleFrames(),
          databaseCpu < 0 || databaseCpuAfter < 0 ? -1 : databaseCpuAfter - databaseCpu);
    } catch (Exception | AssertionError e) {
      result = RowResult.failed(broker, id, name, kind, e.toString());
      e.printStackTrace();
    }
    System.err.printf(Locale.ROOT, "[%s] row %s: %,.0f msg/s, %.3f CPU s/1k msg, %s%n", label, feedId, result.messagesPerSecond(),
        result.cpuSecondsPerThousand(), result.ok() ? "ok" : "FAILED " + result.failures());
    return result;
  }

  /**
   * Row 0: the workload's events in order, from memory, through the SQL of the set-based handler
   * (one dedup insert returning the new ids, one UPDATE of the per-account sums) by one JDBC
   * writer in transactions of {@value #DATABASE_BATCH}: the rate this machine's PostgreSQL allows
   * that SQL, with no broker in the way.
   */
  private Measured databaseAlone() throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    String update = "UPDATE " + tables.accounts()
        + " a SET balance = a.balance + d.amount FROM (SELECT account, sum(amount) AS amount"
        + " FROM unnest(?::bigint[], ?::bigint[]) AS e(account, amount) GROUP BY account) d WHERE a.id = d.account";
    try (Connection c = db.connect();
        PreparedStatement dedup = c.prepareStatement(JdbcSql.dedupMany(tables.inbox()));
        PreparedStatement credit = c.prepareStatement(update)) {
      c.setAutoCommit(false);
      progress.received();
      for (int from = 0; from < workload.total(); from += DATABASE_BATCH) {
        int to = Math.min(workload.total(), from + DATABASE_BATCH);
        List<String> ids = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
          ids.add(Workload.id(workload.eventAt(i)));
        }
        Set<String> fresh = JdbcSql.dedupMany(c, dedup, "db", ids);
        List<Long> accounts = new ArrayList<>();
        List<Long> amounts = new ArrayList<>();
        for (int i = from; i < to; i++) {
          int event = workload.eventAt(i);
          boolean applied = fresh.remove(Workload.id(event));
          if (applied) {
            accounts.add((long) workload.account(event));
            amounts.add(workload.amount(event));
          }
          progress.countEffect(applied);
        }
        Array accountArray = c.createArrayOf("bigint", accounts.toArray());
        Array amountArray = c.createArrayOf("bigint", amounts.toArray());
        credit.setArray(1, accountArray);
        credit.setArray(2, amountArray);
        credit.executeUpdate();
        c.commit();
        accountArray.free();
        amountArray.free();
        for (int i = from; i < to; i++) {
          progress.settledOne();
        }
      }
    }
    return new Measured(progress, observe(progress, null));
  }

  private Measured brokerOnly(Feed feed) throws Exception {
    Progress progress = new Progress(workload.total());
    Set<String> ids = new java.util.HashSet<>();
    feed.brokerOnly(progress, ids);
    String broker = feed.drainedAfterStop();
    return new Measured(progress,
        new Checker.Observation(progress.settled(), -1, -1, 0, ids.size(), -1, null, broker == null, broker));
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
    return new Measured(progress,
        new Checker.Observation(progress.settled(), -1, -1, 0, ids.size(), -1, null, drained == null, drained));
  }

  private Measured jdbc(Feed feed, boolean perPoll) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    if (perPoll) {
      try (PollWriter writer = PollWriter.jdbc(db, tables)) {
        feed.perPoll(progress, writer);
      }
    } else {
      feed.jdbcPerMessage(progress, db, tables);
    }
    String drained = feed.drainedAfterStop();
    return new Measured(progress, observe(progress, drained));
  }

  /** {@code shareConsumers}: 0 reads through the row's consumer group, more through a share group with that many consumers. */
  private Measured parallelConsumer(Feed feed) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    feed.parallelConsumer(progress, db, tables, PARALLEL_CONSUMER_THREADS);
    String drained = feed.drainedAfterStop();
    return new Measured(progress, observe(progress, drained));
  }

  private Measured spring(Feed feed, boolean perPoll) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    try (SpringJdbc jdbc = new SpringJdbc(db, tables)) {
      if (perPoll) {
        feed.springPerPoll(progress, jdbc);
      } else {
        feed.springPerRecord(progress, jdbc);
      }
    }
    String drained = feed.drainedAfterStop();
    return new Measured(progress, observe(progress, drained));
  }

  private Measured r2dbc(Feed feed, boolean setBased) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    try (PollWriter writer = PollWriter.r2dbc(db, tables, setBased)) {
      feed.perPoll(progress, writer);
    }
    String drained = feed.drainedAfterStop();
    return new Measured(progress, observe(progress, drained));
  }

  private Measured idem(Feed feed, IdemSetting setting, int shareConsumers) throws Exception {
    db.reset(tables, workload.accounts());
    Progress progress = new Progress(workload.total());
    BatchSizes batches = new BatchSizes();
    ConnectionPool pool = PostgresConnections.pool(db.r2dbcUrl(), setting.concurrency());
    String settled;
    long frames;
    try {
      IdempotentConsumer<Payment> consumer = setting.consumer("idem-" + setting.id(), PostgresInbox.create(pool, tables.inbox()),
          tables.accounts(),
          batches);
      try (Feed.Source source = shareConsumers == 0
          ? feed.idemSource(setting.prefetch())
          : feed.shareSource(setting.prefetch(), shareConsumers)) {
        Disposable running = consumer.process(source.deliveries().doOnNext(d -> progress.received()))
            .subscribe(progress::settled, progress::failed);
        try {
          progress.await(options.stall);
          settled = feed.settledOnBroker();
        } finally {
          running.dispose();
        }
        frames = source.settleFrames().getAsLong();
      }
    } finally {
      pool.dispose();
    }
    String drained = settled != null ? settled : feed.drainedAfterStop();
    System.err.printf(Locale.ROOT, "[%s] row %s: %s%s%n", label, setting.id(), batches,
        frames < 0 ? "" : ", " + frames + " ack frames");
    return new Measured(progress, observe(progress, drained), batches.count(), frames);
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

    long count() {
      return batches.sum();
    }

    @Override
    public String toString() {
      long n = batches.sum();
      return String.format(Locale.ROOT, "%,d batches, %.1f messages each on average", n,
          n == 0 ? 0.0 : (double) messages.sum() / n);
    }
  }

  private Checker.Observation observe(Progress progress, String brokerProblem) throws Exception {
    return new Checker.Observation(progress.settled(), progress.processed(), progress.duplicates(), progress.deadLettered(), -1,
        db.dedupRows(tables), db.balances(tables), brokerProblem == null, brokerProblem);
  }
}
