package com.example.payments;

import dev.idem.test.HandlerContract;
import dev.idem.test.InMemoryDelivery;
import org.junit.jupiter.api.Test;

/**
 * The application's handler proved exactly-once by idem-test, without a broker: the payments are
 * replayed under every hostile schedule (redelivery after commit, duplicates, a failure after each
 * statement, concurrent lanes, a stop mid-batch) against a real PostgreSQL (127.0.0.1, or
 * {@code POSTGRES_URL}), on accounts 61 to 63 and 69.
 */
class CreditAccountContractTest {

  private static final String POSTGRES_URL = System.getenv().getOrDefault("POSTGRES_URL",
      "r2dbc:postgresql://postgres@127.0.0.1:5432/test");

  @Test
  void creditAccountKeepsItsEffectsExactlyOnce() {
    HandlerContract.forHandler("credit account", PaymentsApp::creditAccount)
        .postgres(POSTGRES_URL)
        .reset("CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)",
            "INSERT INTO accounts (id) VALUES (61), (62), (63) ON CONFLICT (id) DO UPDATE SET balance = 0",
            "DELETE FROM accounts WHERE id = 69")
        .probe("SELECT id, balance FROM accounts WHERE id BETWEEN 61 AND 69 ORDER BY id")
        .messages(
            InMemoryDelivery.of("pay-1", new Payment(61, 700)).withKey("61"),
            InMemoryDelivery.of("pay-2", new Payment(62, 50)).withKey("62"),
            InMemoryDelivery.of("pay-3", new Payment(61, 25)).withKey("61"),
            InMemoryDelivery.of("pay-4", new Payment(69, 10)).withKey("69"),     // no such account: dead-lettered
            InMemoryDelivery.of("pay-5", new Payment(63, 300)).withKey("63"))
        .build()
        .verify();
  }
}
