package dev.idem.examples.payments;

import dev.idem.Handler;
import dev.idem.NonRetryableException;
import reactor.core.publisher.Mono;

/**
 * The payments example's business effect and schema: credit the account and write a ledger row,
 * in the message's transaction. This is all the code a user writes for exactly-once payments.
 */
public final class Payments {

  /** Accounts and their balances. */
  public static final String ACCOUNTS = "idem_demo_accounts";
  /** One row per applied payment; deliberately without a unique key, so a double effect would show. */
  public static final String LEDGER = "idem_demo_payment_ledger";

  private Payments() {}

  /**
   * The handler: credit the account, record the ledger row. An unknown account can never
   * succeed, so it is dead-lettered at once.
   *
   * @return the handler
   */
  public static Handler<PaymentEvent> handler() {
    return (payment, tx) -> tx.sql("UPDATE " + ACCOUNTS + " SET balance = balance + $1 WHERE id = $2")
        .bind(0, payment.amountCents()).bind(1, payment.accountId())
        .execute()
        .flatMap(updated -> updated == 1
            ? tx.sql("INSERT INTO " + LEDGER + " (event_id, account_id, amount) VALUES ($1, $2, $3)")
                .bind(0, tx.messageId()).bind(1, payment.accountId()).bind(2, payment.amountCents())
                .execute()
            : Mono.error(new NonRetryableException("unknown account " + payment.accountId())));
  }

  /**
   * The statements that (re)create the example's tables with {@code accounts} zero balances.
   *
   * @param accounts how many accounts, numbered from 1
   * @return the SQL statements
   */
  public static String[] resetSchema(int accounts) {
    return new String[]{
        "DROP TABLE IF EXISTS " + LEDGER,
        "DROP TABLE IF EXISTS " + ACCOUNTS,
        "CREATE TABLE " + ACCOUNTS + " (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)",
        "CREATE TABLE " + LEDGER
            + " (seq bigserial PRIMARY KEY, event_id text NOT NULL, account_id int NOT NULL, amount bigint NOT NULL)",
        "INSERT INTO " + ACCOUNTS + " (id) SELECT g FROM generate_series(1, " + accounts + ") g"
    };
  }
}
