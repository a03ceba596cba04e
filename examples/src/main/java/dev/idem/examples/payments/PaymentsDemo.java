package dev.idem.examples.payments;

import dev.idem.Outcome;
import dev.idem.examples.ChildProcess;
import dev.idem.examples.DemoEnvironment;
import dev.idem.kafka.DeadLetterRecord;
import dev.idem.kafka.KafkaDeadLetterReplayer;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The payments demo (seed 1): payment events over Kafka applied to an accounts table, with
 * duplicates, poison pills and a real crash of the consumer in the middle.
 *
 * <ol>
 *   <li>Publishes {@code --events} payment events (default 2,000) over {@code --accounts}
 *       accounts (default 50) to a 4-partition topic, then republishes 10% of them with the same
 *       id (producer duplicates), plus 3 undecodable values (poison pills).</li>
 *   <li>Starts the consumer ({@link PaymentsConsumerApp}) as a child JVM and kills it with
 *       SIGKILL once about 40% of the payments are applied: transactions in flight die, offsets
 *       of committed work may not be committed.</li>
 *   <li>Starts a new consumer, which resumes from the committed offsets; redelivered payments
 *       are recognised as duplicates.</li>
 *   <li>Prints a report and checks every account's balance against the sum of its distinct events.</li>
 * </ol>
 *
 * <p>Run: {@code mvn -q -pl examples -am package -DskipTests exec:java}. Flags and services: see
 * {@link DemoEnvironment}.
 */
public final class PaymentsDemo {

  private static final Duration TIMEOUT = Duration.ofMinutes(5);
  private static final int PARTITIONS = 4;
  private static final int POISON_PILLS = 3;

  private PaymentsDemo() {}

  /**
   * What the demo observed.
   *
   * @param events distinct payment events published
   * @param published records published (events, their duplicates and the poison pills)
   * @param deliveriesSeen outcomes reported by the consumer processes (redeliveries included)
   * @param effects ledger rows written, i.e. effects applied
   * @param duplicates deliveries recognised as duplicates
   * @param deadLetters distinct message ids on the dead-letter topic (a consumer killed between
   *     the dead-letter publish and the offset commit publishes that dead letter again on
   *     redelivery; replay deduplicates by id)
   * @param deadLetterRecords records on the dead-letter topic
   * @param crashedAfterEffects effects applied when the first consumer was killed
   * @param balancesMatch whether every balance equals the sum of its distinct events
   * @param offsetsAtEnd whether the committed offsets reached the end of every partition
   */
  public record Report(long events, long published, long deliveriesSeen, long effects, long duplicates,
      long deadLetters, long deadLetterRecords, long crashedAfterEffects, boolean balancesMatch, boolean offsetsAtEnd) {

    /**
     * Whether every check passed.
     *
     * @return {@code true} when the run proved exactly-once effects
     */
    public boolean ok() {
      return balancesMatch && offsetsAtEnd && effects == events && deadLetters == POISON_PILLS;
    }

    @Override
    public String toString() {
      return String.join(System.lineSeparator(),
          "Payments demo report",
          String.format("  messages delivered (distinct events)    %8d", events),
          String.format("  records published (with 10%% repeats)    %8d  (+%d poison pills)", published - POISON_PILLS,
              POISON_PILLS),
          String.format("  deliveries seen (with redeliveries)      %8d", deliveriesSeen),
          String.format("  effects applied                          %8d", effects),
          String.format("  duplicates suppressed                    %8d", duplicates),
          String.format("  dead letters (distinct ids)              %8d  (%d records)", deadLetters, deadLetterRecords),
          String.format("  consumer killed (SIGKILL) after effects  %8d", crashedAfterEffects),
          "  every balance = sum of its distinct events: " + (balancesMatch ? "yes" : "NO"),
          "  offsets committed to the end:               " + (offsetsAtEnd ? "yes" : "NO"),
          ok() ? "RESULT: OK - exactly one effect per event" : "RESULT: FAILED");
    }
  }

  /**
   * Runs the demo and exits with 0 when every check passed.
   *
   * @param args flags, see {@link DemoEnvironment} and the class documentation
   */
  public static void main(String[] args) {
    Report report = run(DemoEnvironment.fromArgs(args));
    System.out.println(report);
    System.exit(report.ok() ? 0 : 1);
  }

  /**
   * Runs the demo.
   *
   * @param env where the services are and the flags
   * @return the report
   */
  public static Report run(DemoEnvironment env) {
    int events = env.intFlag("events", 2000);
    int accounts = env.intFlag("accounts", 50);
    if (events < 10 || accounts < 1) {
      throw new IllegalArgumentException("--events must be at least 10 and --accounts at least 1");
    }
    String postgresUrl = env.postgresUrl();
    String bootstrap = env.kafkaBootstrap();
    String runId = Long.toString(System.currentTimeMillis(), 36);
    String topic = "idem-demo-payments-" + runId;
    String group = "idem_demo_payments_" + runId;
    ConnectionFactory db = ConnectionFactories.get(postgresUrl);
    execute(db, Payments.resetSchema(accounts));

    Map<Integer, Long> expectedBalances = new HashMap<>();
    long published;
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
      published = publish(bootstrap, topic, events, accounts, expectedBalances);
      System.out.printf("[demo] published %d records to %s (%d partitions)%n", published, topic, PARTITIONS);

      Map<Outcome.Status, AtomicLong> seen = new ConcurrentHashMap<>();
      for (Outcome.Status status : Outcome.Status.values()) {
        seen.put(status, new AtomicLong());
      }
      Path log = Files.createTempFile("idem-payments-consumer-", ".log");
      String[] childArgs = {"--kafka=" + bootstrap, "--postgres=" + postgresUrl, "--topic=" + topic, "--group=" + group};

      java.util.function.Consumer<String> onLine = line -> count(line, seen, log);
      ChildProcess first = ChildProcess.start(PaymentsConsumerApp.class, log, onLine, childArgs);
      long crashedAfter = awaitEffects(db, events * 4L / 10, first, log);
      first.kill();
      System.out.printf("[demo] killed consumer process %d with SIGKILL after %d effects%n", first.pid(), crashedAfter);

      boolean offsetsAtEnd;
      List<DeadLetterRecord> deadLetters;
      try (ChildProcess second = ChildProcess.start(PaymentsConsumerApp.class, log, onLine, childArgs)) {
        System.out.printf("[demo] restarted the consumer as process %d; its log: %s%n", second.pid(), log);
        awaitEffects(db, events, second, log);
        offsetsAtEnd = awaitOffsetsAtEnd(admin, topic, group);
        deadLetters = KafkaDeadLetterReplayer.create(bootstrap).read(topic + ".DLT");
      }
      long effects = queryLong(db, "SELECT count(*) FROM " + Payments.LEDGER);
      boolean balancesMatch = balancesMatch(db, expectedBalances);
      long deliveriesSeen = seen.values().stream().mapToLong(AtomicLong::get).sum();
      long distinctDeadLetters = deadLetters.stream().map(DeadLetterRecord::messageId).distinct().count();
      return new Report(events, published, deliveriesSeen, effects, seen.get(Outcome.Status.DUPLICATE).get(),
          distinctDeadLetters, deadLetters.size(), crashedAfter, balancesMatch, offsetsAtEnd);
    } catch (Exception e) {
      throw new IllegalStateException("The payments demo failed: " + e.getMessage(), e);
    }
  }

  private static void count(String line, Map<Outcome.Status, AtomicLong> seen, Path log) {
    if (line.startsWith("OUTCOME ")) {
      String status = line.split(" ")[1];
      seen.get(Outcome.Status.valueOf(status)).incrementAndGet();
    } else {
      try {
        Files.writeString(log, line + System.lineSeparator(), java.nio.file.StandardOpenOption.APPEND);
      } catch (java.io.IOException e) {
        // the log is a convenience; the report does not depend on it
      }
    }
  }

  private static long publish(String bootstrap, String topic, int events, int accounts, Map<Integer, Long> expected) {
    Random random = new Random(42);
    List<PaymentEvent> all = new ArrayList<>();
    for (int i = 0; i < events; i++) {
      PaymentEvent event = new PaymentEvent("payment-" + i, 1 + random.nextInt(accounts), 100 + random.nextInt(10_000));
      all.add(event);
      expected.merge(event.accountId(), event.amountCents(), Long::sum);
    }
    List<ProducerRecord<String, byte[]>> records = new ArrayList<>();
    for (int i = 0; i < all.size(); i++) {
      records.add(record(topic, all.get(i)));
      if (i % 10 == 9) { // a producer retry: the same event again, same id
        records.add(record(topic, all.get(random.nextInt(i + 1))));
      }
      if (i == events / 4 || i == events / 2 || i == 3 * events / 4) { // poison pills
        ProducerRecord<String, byte[]> poison = new ProducerRecord<>(topic, "1",
            "{not a payment".getBytes(StandardCharsets.UTF_8));
        poison.headers().add("message-id", ("poison-" + i).getBytes(StandardCharsets.UTF_8));
        records.add(poison);
      }
    }
    sendAll(bootstrap, records);
    return records.size();
  }

  /**
   * Sends every record and checks every send. A send can fail for good (for example with
   * OUT_OF_ORDER_SEQUENCE_NUMBER from an idempotent producer writing to a topic created an instant
   * before): such records are sent again, by a new producer, so that the demo never waits for
   * payments that were never published. A record sent twice is a duplicate, which the consumer
   * recognises by its id.
   */
  private static void sendAll(String bootstrap, List<ProducerRecord<String, byte[]>> records) {
    Map<String, Object> props = Map.of(
        ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
        ProducerConfig.ACKS_CONFIG, "all",
        ProducerConfig.LINGER_MS_CONFIG, 5);
    List<ProducerRecord<String, byte[]>> pending = records;
    for (int round = 1; !pending.isEmpty(); round++) {
      List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> sends = new ArrayList<>();
      List<ProducerRecord<String, byte[]>> failed = new ArrayList<>();
      Throwable lastFailure = null;
      try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props, new StringSerializer(),
          new ByteArraySerializer())) {
        pending.forEach(r -> sends.add(producer.send(r)));
        producer.flush();
        for (int i = 0; i < sends.size(); i++) {
          try {
            sends.get(i).get();
          } catch (java.util.concurrent.ExecutionException e) {
            failed.add(pending.get(i));
            lastFailure = e.getCause();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while publishing", e);
          }
        }
      }
      if (!failed.isEmpty()) {
        if (round == 5) {
          throw new IllegalStateException(failed.size() + " records could not be published after 5 rounds: " + lastFailure,
              lastFailure);
        }
        System.out.printf("[demo] %d of %d records were not written (%s); sending them again%n", failed.size(), pending.size(),
            lastFailure);
      }
      pending = failed;
    }
  }

  private static ProducerRecord<String, byte[]> record(String topic, PaymentEvent event) {
    ProducerRecord<String, byte[]> record = new ProducerRecord<>(topic, Integer.toString(event.accountId()), event.encodeValue());
    record.headers().add("message-id", event.eventId().getBytes(StandardCharsets.UTF_8));
    return record;
  }

  private static long awaitEffects(ConnectionFactory db, long target, ChildProcess consumer, Path log)
      throws InterruptedException, java.io.IOException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    long effects = 0;
    while (System.nanoTime() < deadline) {
      effects = queryLong(db, "SELECT count(*) FROM " + Payments.LEDGER);
      if (effects >= target) {
        return effects;
      }
      if (!consumer.isAlive()) {
        throw new IllegalStateException("the consumer process exited early; its log " + log + " ends with:"
            + System.lineSeparator() + tail(log, 40));
      }
      Thread.sleep(50);
    }
    String before = tail(log, 60);
    // A stalled consumer: keep what explains it (its threads and what the database waits for) in the report.
    String activity = String.join(System.lineSeparator(), queryRows(db,
        "SELECT pid || ' ' || state || ' ' || coalesce(wait_event_type, '-') || '/' || coalesce(wait_event, '-') || ' '"
            + " || left(query, 120) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"));
    Files.writeString(log, "--- pg_stat_activity ---" + System.lineSeparator() + activity + System.lineSeparator()
        + "--- thread dump of the consumer ---" + System.lineSeparator() + consumer.threadDump(),
        java.nio.file.StandardOpenOption.APPEND);
    throw new IllegalStateException("timed out waiting for " + target + " effects after " + TIMEOUT.toMinutes() + " min: "
        + effects + " applied; the consumer (process " + consumer.pid() + ") is alive. Its log, with its threads and the "
        + "database's sessions at the timeout: " + log + "; the log before them ends with:" + System.lineSeparator() + before);
  }

  private static String tail(Path file, int lines) throws java.io.IOException {
    List<String> all = Files.readAllLines(file);
    return String.join(System.lineSeparator(), all.subList(Math.max(0, all.size() - lines), all.size()));
  }

  private static boolean awaitOffsetsAtEnd(Admin admin, String topic, String group) throws Exception {
    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
    for (int p = 0; p < PARTITIONS; p++) {
      latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
    }
    var ends = admin.listOffsets(latest).all().get();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (System.nanoTime() < deadline) {
      Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
          .get();
      boolean atEnd = ends.entrySet().stream().allMatch(e -> committed.get(e.getKey()) != null
          && committed.get(e.getKey()).offset() == e.getValue().offset());
      if (atEnd) {
        return true;
      }
      Thread.sleep(100);
    }
    return false;
  }

  private static boolean balancesMatch(ConnectionFactory db, Map<Integer, Long> expected) {
    Map<Integer, Long> actual = Mono.usingWhen(db.create(),
        c -> Flux.from(c.createStatement("SELECT id, balance FROM " + Payments.ACCOUNTS).execute())
            .flatMap(r -> r.map((row, meta) -> Map.entry(row.get("id", Integer.class), row.get("balance", Long.class))))
            .collectMap(Map.Entry::getKey, Map.Entry::getValue),
        Connection::close).block(TIMEOUT);
    return actual.entrySet().stream().allMatch(e -> e.getValue().equals(expected.getOrDefault(e.getKey(), 0L)));
  }

  private static List<String> queryRows(ConnectionFactory db, String sql) {
    return Flux.usingWhen(db.create(),
        c -> Flux.from(c.createStatement(sql).execute())
            .flatMap(r -> r.map((row, meta) -> String.valueOf(row.get(0, String.class)))),
        Connection::close).collectList().block(TIMEOUT);
  }

  static long queryLong(ConnectionFactory db, String sql) {
    return Mono.usingWhen(db.create(),
        c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        Connection::close).block(TIMEOUT);
  }

  static void execute(ConnectionFactory db, String... statements) {
    Mono.usingWhen(db.create(),
        c -> Flux.fromArray(statements)
            .concatMap(sql -> Flux.from(c.createStatement(sql).execute()).flatMap(r -> r.getRowsUpdated())).then(),
        Connection::close).block(TIMEOUT);
  }
}
