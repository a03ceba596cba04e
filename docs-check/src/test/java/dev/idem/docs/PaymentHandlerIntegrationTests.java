package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.test.InMemoryDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The test of docs/testing.md: the getting-started handler run through the real pipeline against
 * a real PostgreSQL ({@code IDEM_TEST_POSTGRES_URL}, or the server on 127.0.0.1:5432), with
 * in-memory deliveries instead of a broker.
 */
class PaymentHandlerIntegrationTests {

  private static final String POSTGRES_URL = System.getenv()
      .getOrDefault("IDEM_TEST_POSTGRES_URL", "r2dbc:postgresql://postgres@127.0.0.1:5432/test");

  private final ConnectionPool pool = PostgresConnections.pool(POSTGRES_URL, 8);   // at least the consumer's concurrency (8 by default)

  @AfterEach
  void closePool() {
    pool.dispose();
  }

  private void sql(String statement) {
    Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement(statement).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())),
        c -> c.close()).block();
  }

  private long balance(long account) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement("SELECT balance FROM accounts WHERE id = " + account).execute())
            .flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        c -> c.close()).block();
  }

  // tag::test[]
  @Test
  void aRedeliveredPaymentIsCreditedOnceAndAnUnknownAccountIsDeadLettered() {
    sql("CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)");
    sql("INSERT INTO accounts (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET balance = 0");
    sql("DELETE FROM accounts WHERE id = 99");          // the unknown account below, whatever ran before
    PostgresInbox inbox = PostgresInbox.create(pool);
    inbox.createSchemaIfAbsent().block();
    IdempotentConsumer<Payment> consumer = IdempotentConsumer.<Payment>named("payments-test-" + System.nanoTime())
        .inbox(inbox)                                   // a fresh consumer name: no ids from earlier runs
        .handler(GettingStarted.creditAccount())
        .build();

    List<InMemoryDelivery<Payment>> deliveries = List.of(
        InMemoryDelivery.of("p-1", new Payment(1, 500)),
        InMemoryDelivery.of("p-1", new Payment(1, 500)),    // the same message, redelivered
        InMemoryDelivery.of("p-2", new Payment(99, 100)));  // an account that does not exist
    List<Outcome.Status> outcomes = consumer.process(Flux.fromIterable(deliveries))
        .map(Outcome::status)
        .collectList()
        .block();

    assertThat(outcomes).containsExactlyInAnyOrder(
        Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE, Outcome.Status.DEAD_LETTERED);
    assertThat(balance(1)).isEqualTo(500);
    assertThat(deliveries.get(2).settledAs()).isEqualTo("dead letter: NON_RETRYABLE_ERROR");
  }
  // end::test[]
}
