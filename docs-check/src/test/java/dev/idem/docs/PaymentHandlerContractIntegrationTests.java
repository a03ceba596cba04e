package dev.idem.docs;

import dev.idem.test.HandlerContract;
import dev.idem.test.InMemoryDelivery;
import org.junit.jupiter.api.Test;

/**
 * The contract test of docs/testing.md: the getting-started handler replayed by idem-test under
 * every hostile schedule against a real PostgreSQL ({@code IDEM_TEST_POSTGRES_URL}, or the server
 * on 127.0.0.1:5432). It uses accounts 51 to 53 and 59 of the shared {@code accounts} table.
 */
class PaymentHandlerContractIntegrationTests {

  private static final String POSTGRES_URL = System.getenv()
      .getOrDefault("IDEM_TEST_POSTGRES_URL", "r2dbc:postgresql://postgres@127.0.0.1:5432/test");

  // tag::contract[]
  @Test
  void creditAccountKeepsItsEffectsExactlyOnceUnderEverySchedule() {
    HandlerContract.forHandler("credit account", GettingStarted::creditAccount)
        .postgres(POSTGRES_URL)
        .reset("CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)",
            "INSERT INTO accounts (id) VALUES (51), (52), (53) ON CONFLICT (id) DO UPDATE SET balance = 0",
            "DELETE FROM accounts WHERE id = 59")               // an unknown account: dead-lettered every time
        .probe("SELECT id, balance FROM accounts WHERE id BETWEEN 51 AND 59 ORDER BY id")
        .messages(
            InMemoryDelivery.of("p-1", new Payment(51, 500)).withKey("51"),
            InMemoryDelivery.of("p-2", new Payment(52, 300)).withKey("52"),
            InMemoryDelivery.of("p-3", new Payment(51, 200)).withKey("51"),
            InMemoryDelivery.of("p-4", new Payment(59, 100)).withKey("59"),
            InMemoryDelivery.of("p-5", new Payment(53, 50)).withKey("53"))
        .build()
        .verify();                                              // a ContractViolation names each mistake
  }
  // end::contract[]
}
