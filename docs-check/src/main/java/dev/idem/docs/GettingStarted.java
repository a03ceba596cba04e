package dev.idem.docs;

// tag::imports[]
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

// end::imports[]

/**
 * The consumer of README.md and docs/getting-started.md: payments from Kafka credited to accounts
 * in PostgreSQL, each exactly once. {@code PaymentHandlerIntegrationTests} runs its handler
 * against a real PostgreSQL.
 */
public final class GettingStarted {

  private GettingStarted() {}

  /**
   * The effect: credit the account. An unknown account can never succeed, so that payment is
   * dead-lettered at once instead of retried.
   *
   * @return the handler
   */
  // tag::handler[]
  public static Handler<Payment> creditAccount() {
    return (payment, tx) -> tx.sql("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
        .bind(0, payment.amountCents()).bind(1, payment.accountId())
        .execute()
        .flatMap(updated -> updated == 1
            ? Mono.just(updated)
            : Mono.error(new NonRetryableException("unknown account " + payment.accountId())));
  }
  // end::handler[]

  /**
   * Runs the consumer until the process ends.
   *
   * @param args none
   */
  public static void main(String[] args) {
    // tag::wiring[]
    ConnectionPool pool = PostgresConnections.pool("r2dbc:postgresql://postgres@127.0.0.1:5432/test", 8);
    PostgresInbox inbox = PostgresInbox.create(pool);        // the processed_messages table
    inbox.createSchemaIfAbsent().block();                    // or run the shipped migration

    IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named("payments")
        .inbox(inbox)
        .handler(creditAccount())
        .build();                                            // defaults: ordered by key, 5 attempts

    KafkaSource<Payment> source = KafkaSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers("127.0.0.1:9092")
        .groupId("payments")
        .topics("payments")
        .valueDeserializer(new Payment.KafkaDeserializer())
        .build());

    source.receive()
        .transform(payments::process)
        .doOnNext(outcome -> System.out.println(outcome.status() + " " + outcome.messageId()))
        .blockLast();                                        // or subscribe() inside your application
    // end::wiring[]
  }

  // tag::rabbit-swap[]
  /** The same consumer fed by RabbitMQ (uri: "amqp://guest:guest@127.0.0.1:5672", queue: "payments"). */
  static Flux<Outcome<Payment>> fromRabbit(IdempotentConsumer<Payment> payments, String uri, String queue)
      throws Exception {
    ConnectionFactory factory = new ConnectionFactory();    // amqp-client's, to declare the queues once
    factory.setUri(uri);
    try (Connection connection = factory.newConnection("payments-setup")) {
      RabbitTopology.declare(connection, queue, RabbitTopology.QueueType.QUORUM);  // queue, queue.dlx, queue.dlq
    }

    RabbitSource<Payment> source = RabbitSource.create(RabbitSourceOptions.builder(queue)
        .uri(uri)
        .orderingKey((envelope, properties) -> accountOf(properties))   // without it: no order at all
        .build(),
        (body, properties) -> Payment.parse(new String(body, StandardCharsets.UTF_8)));
    return source.receive().transform(payments::process);
  }

  /** The producer's header {@code account-id}: one account's payments apply in order. */
  static String accountOf(AMQP.BasicProperties properties) {
    Object account = properties.getHeaders() == null ? null : properties.getHeaders().get("account-id");
    return account == null ? null : account.toString();
  }
  // end::rabbit-swap[]
}
