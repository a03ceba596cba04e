package dev.idem.examples.payments;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.RetryPolicy;
import dev.idem.examples.DemoEnvironment;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;

/**
 * The payments consumer as its own process: Kafka in, one PostgreSQL transaction per payment,
 * offsets committed after commit. {@link PaymentsDemo} runs it as a child process and kills it
 * with SIGKILL mid-stream to show that a real crash loses nothing and applies nothing twice.
 *
 * <p>Prints one line per settled message on standard output: {@code OUTCOME <status> <id>}.
 *
 * <p>Flags: {@code --kafka=}, {@code --postgres=}, {@code --topic=}, {@code --group=},
 * {@code --concurrency=} (default 8).
 */
public final class PaymentsConsumerApp {

  private PaymentsConsumerApp() {}

  /**
   * Runs until killed.
   *
   * @param args the flags
   * @throws InterruptedException never in practice; the process is killed
   */
  public static void main(String[] args) throws InterruptedException {
    DemoEnvironment env = DemoEnvironment.fromArgs(args);
    int concurrency = env.intFlag("concurrency", 8);
    String topic = env.flag("topic", "payments");
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), concurrency);
    PostgresInbox inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block();

    // --- the example a user would write ---
    IdempotentConsumer<PaymentEvent> payments = IdempotentConsumer.<PaymentEvent>named(env.flag("group", "payments"))
        .inbox(inbox)
        .handler(Payments.handler())
        .concurrency(concurrency)
        .ordering(Ordering.BY_KEY)
        .retry(RetryPolicy.backoff(5, Duration.ofMillis(200)))
        .build();
    KafkaSource<PaymentEvent> source = KafkaSource.create(KafkaSourceOptions.<PaymentEvent>builder()
        .bootstrapServers(env.kafkaBootstrap())
        .groupId(env.flag("group", "payments"))
        .topics(topic)
        .valueDeserializer(new PaymentEvent.ValueDeserializer())
        // A crashed member holds its partitions until its session expires, and a rebalance waits
        // up to max.poll.interval.ms for members to rejoin: keep both short for a quick takeover.
        .consumerProperty("session.timeout.ms", 10_000)
        .consumerProperty("max.poll.interval.ms", 60_000)
        .build());
    source.receive()
        .transform(payments::process)
        .subscribe(outcome -> System.out.println("OUTCOME " + outcome.status() + " " + outcome.messageId()),
            error -> {
              // The stream ends only on a JVM error or a source failure it could not recover from; the messages
              // in flight stay unacknowledged. Exit, so that a supervisor (here the demo) sees it and restarts.
              System.err.println("the consumer's stream ended: " + error);
              error.printStackTrace();
              System.exit(1);
            });
    // --- end of the example ---

    System.out.println("READY");
    new CountDownLatch(1).await();
  }
}
