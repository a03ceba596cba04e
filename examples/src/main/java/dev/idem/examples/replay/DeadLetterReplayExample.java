package dev.idem.examples.replay;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.examples.DemoEnvironment;
import dev.idem.examples.payments.PaymentEvent;
import dev.idem.examples.payments.Payments;
import dev.idem.kafka.KafkaDeadLetterReplayer;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Dead-letter replay over Kafka: a payment for an account that does not exist yet is
 * dead-lettered (its handler error is non-retryable); the account is created ("the handler is
 * fixed"); the dead letter is replayed with its original message id and applied once; replaying
 * it a second time is recognised as a duplicate.
 *
 * <p>Run: {@code mvn -q -pl examples -am package -DskipTests exec:java -Dexec.mainClass=dev.idem.examples.replay.DeadLetterReplayExample}
 */
public final class DeadLetterReplayExample {

  private static final Duration TIMEOUT = Duration.ofMinutes(2);
  private static final int MISSING_ACCOUNT = 999;
  private static final String POISON_ID = "payment-to-missing-account";

  private DeadLetterReplayExample() {}

  /**
   * What the example observed.
   *
   * @param firstOutcome the poison payment's first outcome
   * @param replayed records replayed in each of the two replays
   * @param afterFirstReplay the outcome of the first replay
   * @param afterSecondReplay the outcome of the second replay
   * @param effects ledger rows of the payment at the end
   */
  public record Report(Outcome.Status firstOutcome, List<Long> replayed, Outcome.Status afterFirstReplay,
      Outcome.Status afterSecondReplay, long effects) {

    /**
     * Whether the replay applied the payment exactly once.
     *
     * @return {@code true} on success
     */
    public boolean ok() {
      return firstOutcome == Outcome.Status.DEAD_LETTERED && replayed.equals(List.of(1L, 1L))
          && afterFirstReplay == Outcome.Status.PROCESSED && afterSecondReplay == Outcome.Status.DUPLICATE && effects == 1;
    }

    @Override
    public String toString() {
      return String.join(System.lineSeparator(),
          "Dead-letter replay report",
          "  first delivery:          " + firstOutcome,
          "  records replayed:        " + replayed,
          "  after the first replay:  " + afterFirstReplay,
          "  after the second replay: " + afterSecondReplay,
          "  effects of the payment:  " + effects,
          ok() ? "RESULT: OK - replayed once, applied once" : "RESULT: FAILED");
    }
  }

  /**
   * Runs the example and exits with 0 on success.
   *
   * @param args flags, see {@link DemoEnvironment}
   */
  public static void main(String[] args) {
    Report report = run(DemoEnvironment.fromArgs(args));
    System.out.println(report);
    System.exit(report.ok() ? 0 : 1);
  }

  /**
   * Runs the example.
   *
   * @param env services and flags
   * @return the report
   */
  public static Report run(DemoEnvironment env) {
    String bootstrap = env.kafkaBootstrap();
    String run = Long.toString(System.nanoTime(), 36);
    String topic = "idem-demo-replay-" + run;
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), 4);
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      execute(pool, Payments.resetSchema(3));
      PostgresInbox inbox = PostgresInbox.create(pool);
      inbox.createSchemaIfAbsent().block(TIMEOUT);
      admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();

      IdempotentConsumer<PaymentEvent> payments = IdempotentConsumer.<PaymentEvent>named("replay-example-" + run)
          .inbox(inbox).handler(Payments.handler()).ordering(Ordering.BY_KEY).build();
      List<Outcome<PaymentEvent>> outcomes = new CopyOnWriteArrayList<>();
      try (KafkaSource<PaymentEvent> source = KafkaSource.create(KafkaSourceOptions.<PaymentEvent>builder()
          .bootstrapServers(bootstrap).groupId("replay-example-" + run).topics(topic)
          .valueDeserializer(new PaymentEvent.ValueDeserializer()).build())) {
        Disposable running = source.receive().transform(payments::process).subscribe(outcomes::add);
        try {
          publish(bootstrap, topic, new PaymentEvent(POISON_ID, MISSING_ACCOUNT, 2500));
          Outcome.Status first = awaitOutcome(outcomes, 1);
          System.out.println("[replay] first delivery: " + first + " (" + outcomes.get(0).deadLetter().detail() + ")");

          execute(pool, "INSERT INTO " + Payments.ACCOUNTS + " (id) VALUES (" + MISSING_ACCOUNT + ")");
          System.out.println("[replay] account " + MISSING_ACCOUNT + " created: the handler can succeed now");

          KafkaDeadLetterReplayer replayer = KafkaDeadLetterReplayer.create(bootstrap);
          long firstReplay = replayer.replay(topic + ".DLT", record -> POISON_ID.equals(record.messageId()));
          Outcome.Status afterFirst = awaitOutcome(outcomes, 2);
          long secondReplay = replayer.replay(topic + ".DLT", record -> POISON_ID.equals(record.messageId()));
          Outcome.Status afterSecond = awaitOutcome(outcomes, 3);
          long effects = count(pool, "SELECT count(*) FROM " + Payments.LEDGER + " WHERE event_id = '" + POISON_ID + "'");
          return new Report(first, List.of(firstReplay, secondReplay), afterFirst, afterSecond, effects);
        } finally {
          running.dispose();
        }
      }
    } catch (Exception e) {
      throw new IllegalStateException("The replay example failed: " + e.getMessage(), e);
    } finally {
      pool.dispose();
    }
  }

  private static Outcome.Status awaitOutcome(List<Outcome<PaymentEvent>> outcomes, int n) throws InterruptedException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (outcomes.size() < n) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("timed out waiting for outcome #" + n);
      }
      Thread.sleep(20);
    }
    return outcomes.get(n - 1).status();
  }

  private static void publish(String bootstrap, String topic, PaymentEvent event) throws Exception {
    try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(
        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap, ProducerConfig.ACKS_CONFIG, "all"),
        new StringSerializer(), new ByteArraySerializer())) {
      ProducerRecord<String, byte[]> record = new ProducerRecord<>(topic, Integer.toString(event.accountId()),
          event.encodeValue());
      record.headers().add("message-id", event.eventId().getBytes(StandardCharsets.UTF_8));
      producer.send(record).get();
    }
  }

  private static void execute(ConnectionPool pool, String... statements) {
    Mono.usingWhen(pool.create(),
        c -> Flux.fromArray(statements)
            .concatMap(sql -> Flux.from(c.createStatement(sql).execute()).flatMap(r -> r.getRowsUpdated())).then(),
        io.r2dbc.spi.Connection::close).block(TIMEOUT);
  }

  private static long count(ConnectionPool pool, String sql) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        io.r2dbc.spi.Connection::close).block(TIMEOUT);
  }
}
