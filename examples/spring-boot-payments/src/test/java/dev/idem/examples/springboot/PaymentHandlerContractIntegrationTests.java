package dev.idem.examples.springboot;

import dev.idem.spring.test.SpringHandlerContracts;
import dev.idem.test.HandlerContract;
import dev.idem.test.InMemoryDelivery;
import dev.idem.testing.PostgresService;
import io.r2dbc.spi.ConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.data.r2dbc.test.autoconfigure.DataR2dbcTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The application's {@link PaymentHandler}, with its Spring Data R2DBC repositories and the
 * application's {@code ConnectionFactory} bean, proved exactly-once by idem-test's
 * {@link HandlerContract} through the starter's {@link SpringHandlerContracts} (the repositories
 * join the message's transaction, as in the application): the payments are replayed under every
 * hostile schedule (redelivery after commit, duplicates, a failure after each statement,
 * concurrent lanes, a stop mid-batch) against the real PostgreSQL, without Kafka. The Data R2DBC
 * slice starts the repositories and runs the application's {@code schema.sql}, in a schema of this
 * test's own (the URL's {@code schema}, PostgreSQL's {@code search_path}), so that the application
 * tests' resets of {@code accounts} in this or another build never meet it.
 */
@DataR2dbcTest
class PaymentHandlerContractIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final String SCHEMA = PostgresService.uniqueName("payments_contract");

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    PG.execute("CREATE SCHEMA " + SCHEMA);
    registry.add("spring.r2dbc.url", () -> PG.url() + (PG.url().contains("?") ? "&" : "?") + "schema=" + SCHEMA);
  }

  @AfterAll
  static void dropSchema() {
    PG.execute("DROP SCHEMA IF EXISTS " + SCHEMA + " CASCADE");
  }

  @Autowired ConnectionFactory connectionFactory;
  @Autowired AccountRepository accounts;
  @Autowired PaymentRepository payments;

  // tag::contract[] (quoted in docs/spring-boot.md)
  @Test
  void thePaymentHandlerKeepsItsEffectsExactlyOnce() {
    // The repositories join the message's transaction, on the application's pool (the contract runs on it too).
    SpringHandlerContracts.forHandler("payment handler", () -> new PaymentHandler(accounts, payments), connectionFactory)
        .reset("DELETE FROM payments", "UPDATE accounts SET balance = 0", "DELETE FROM accounts WHERE id = 99")
        .probe("SELECT a.id, a.balance, string_agg(p.event_id, ',' ORDER BY p.event_id) AS events FROM accounts a "
            + "LEFT JOIN payments p ON p.account_id = a.id WHERE a.balance <> 0 OR p.id IS NOT NULL GROUP BY a.id ORDER BY a.id")
        .messages(
            InMemoryDelivery.of("pay-1", new Payment(1, 500)).withKey("1"),
            InMemoryDelivery.of("pay-2", new Payment(2, 300)).withKey("2"),
            InMemoryDelivery.of("pay-3", new Payment(1, 200)).withKey("1"),
            InMemoryDelivery.of("pay-4", new Payment(99, 100)).withKey("99"),   // no such account: dead-lettered
            InMemoryDelivery.of("pay-5", new Payment(3, 50)).withKey("3"),
            InMemoryDelivery.of("pay-6", new Payment(2, 25)).withKey("2"))
        .build()
        .verify();
  }
  // end::contract[]
}
