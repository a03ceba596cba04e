package com.example.payments;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Payments from a RabbitMQ queue credited to accounts in PostgreSQL, each exactly once: the
 * application of docs/getting-started.md as a project of its own. Run it with
 * {@code mvn -q compile exec:java -Dexec.mainClass=com.example.payments.PaymentsApp}, against
 * PostgreSQL on 127.0.0.1:5432 (database {@code test}) and RabbitMQ on 127.0.0.1:5672, or the
 * servers that {@code POSTGRES_URL} (an R2DBC URL) and {@code RABBIT_URI} name.
 */
public final class PaymentsApp {

  private PaymentsApp() {}

  /**
   * Runs the consumer of the queue {@code payments} until the process ends, printing each outcome.
   *
   * @param args none
   * @throws Exception when the queue cannot be declared
   */
  public static void main(String[] args) throws Exception {
    String postgresUrl = System.getenv().getOrDefault("POSTGRES_URL", "r2dbc:postgresql://postgres@127.0.0.1:5432/test");
    String rabbitUri = System.getenv().getOrDefault("RABBIT_URI", "amqp://guest:guest@127.0.0.1:5672");
    ConnectionPool pool = PostgresConnections.pool(postgresUrl, 8);   // at least the consumer's concurrency (8)
    consume(pool, rabbitUri, "payments", "payments")
        .doOnNext(outcome -> System.out.println(outcome.status() + " " + outcome.messageId()))
        .blockLast();
  }

  /**
   * The effect: credit the account; an unknown account can never succeed, so its payment is
   * dead-lettered at once instead of retried.
   *
   * @return the handler
   */
  public static Handler<Payment> creditAccount() {
    return (payment, tx) -> tx.sql("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
        .bind(0, payment.amountCents()).bind(1, payment.accountId())
        .execute()
        .flatMap(updated -> updated == 1
            ? Mono.just(updated)
            : Mono.error(new NonRetryableException("unknown account " + payment.accountId())));
  }

  /**
   * Creates the tables when absent (accounts 1 to 100, and Idem's inbox), declares the queue with
   * its dead-letter exchange and queue, and returns the consumer's outcomes: nothing is read until
   * they are subscribed to.
   *
   * @param pool the PostgreSQL connections
   * @param rabbitUri the RabbitMQ server
   * @param consumerName the consumer's name, part of the dedup key
   * @param queue the queue
   * @return each message's outcome, after it was settled with the broker
   * @throws Exception when the queue cannot be declared
   */
  public static Flux<Outcome<Payment>> consume(ConnectionPool pool, String rabbitUri, String consumerName, String queue)
      throws Exception {
    Mono.usingWhen(pool.create(),
        connection -> Flux.from(connection.createBatch()
            .add("CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)")
            .add("INSERT INTO accounts (id) SELECT g FROM generate_series(1, 100) g ON CONFLICT DO NOTHING")
            .execute())
            .flatMap(result -> result.getRowsUpdated())
            .then(),
        connection -> connection.close())
        .block();
    PostgresInbox inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block();

    ConnectionFactory factory = new ConnectionFactory();
    factory.setUri(rabbitUri);
    try (Connection connection = factory.newConnection(queue + "-setup")) {
      RabbitTopology.declare(connection, queue, RabbitTopology.QueueType.QUORUM);   // queue, queue.dlx, queue.dlq
    }

    IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named(consumerName)
        .inbox(inbox)
        .handler(creditAccount())
        .build();
    RabbitSource<Payment> source = RabbitSource.create(RabbitSourceOptions.builder(queue)
        .uri(rabbitUri)
        .orderingKey((envelope, properties) -> accountOf(properties))
        .build(),
        (body, properties) -> Payment.parse(new String(body, StandardCharsets.UTF_8)));
    return source.receive().transform(payments::process);
  }

  /** The producer's header {@code account-id}: one account's payments apply in order. */
  static String accountOf(AMQP.BasicProperties properties) {
    Object account = properties.getHeaders() == null ? null : properties.getHeaders().get("account-id");
    return account == null ? null : account.toString();
  }
}
