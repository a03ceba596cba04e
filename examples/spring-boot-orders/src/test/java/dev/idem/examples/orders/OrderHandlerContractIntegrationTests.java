package dev.idem.examples.orders;

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
 * The application's {@link OrderHandler} (both consumers' handler), with its Spring Data R2DBC
 * repositories and the application's {@code ConnectionFactory} bean, proved exactly-once by
 * idem-test's {@link HandlerContract} through the starter's {@link SpringHandlerContracts} (the
 * repositories join the message's transaction, as in the application): the orders are replayed
 * under every hostile schedule (redelivery after commit, duplicates, a failure after each
 * statement, concurrent lanes, a stop mid-batch) against the real PostgreSQL, without Kafka or
 * RabbitMQ. The orders carry the customer as their ordering key, as on the Kafka channel. The Data
 * R2DBC slice starts the repositories and runs the application's {@code schema.sql}, in a schema
 * of this test's own (the URL's {@code schema}, PostgreSQL's {@code search_path}), so that the
 * application tests' resets in this or another build never meet it.
 */
@DataR2dbcTest
class OrderHandlerContractIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final String SCHEMA = PostgresService.uniqueName("orders_contract");

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
  @Autowired CustomerRepository customers;
  @Autowired OrderRepository orders;

  @Test
  void theOrderHandlerKeepsItsEffectsExactlyOnce() {
    // The repositories join the message's transaction, on the application's pool (the contract runs on it too).
    SpringHandlerContracts.forHandler("order handler", () -> new OrderHandler(customers, orders), connectionFactory)
        .reset("DELETE FROM shop_orders", "UPDATE customers SET orders = 0, total_cents = 0",
            "DELETE FROM customers WHERE id = 999")
        .probe("SELECT c.id, c.orders, c.total_cents, string_agg(o.order_id, ',' ORDER BY o.order_id) AS order_ids "
            + "FROM customers c LEFT JOIN shop_orders o ON o.customer_id = c.id "
            + "WHERE c.orders <> 0 OR c.total_cents <> 0 OR o.id IS NOT NULL GROUP BY c.id ORDER BY c.id")
        .messages(
            InMemoryDelivery.of("o-1", new Order("o-1", 1, 1250)).withKey("1"),
            InMemoryDelivery.of("o-2", new Order("o-2", 2, 300)).withKey("2"),
            InMemoryDelivery.of("o-3", new Order("o-3", 1, 200)).withKey("1"),
            InMemoryDelivery.of("o-4", new Order("o-4", 999, 100)).withKey("999"),   // no such customer: dead-lettered
            InMemoryDelivery.of("o-5", new Order("o-5", 3, 50)).withKey("3"),
            InMemoryDelivery.of("o-6", new Order("o-6", 2, 25)).withKey("2"))
        .build()
        .verify();
  }
}
