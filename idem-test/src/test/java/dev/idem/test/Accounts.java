package dev.idem.test;

import dev.idem.BatchHandler;
import dev.idem.Handler;
import dev.idem.testing.PostgresService;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;

/**
 * The business the kit's tests run handlers on: payments credited to accounts, each written to a
 * ledger; tables of their own per test.
 */
final class Accounts {

  /** A payment of {@code amount} to {@code account}. */
  record Payment(long account, long amount) {}

  final String accounts = PostgresService.uniqueName("kit_accounts");
  final String ledger = PostgresService.uniqueName("kit_ledger");

  Accounts create() {
    PostgresService.get().execute(
        "CREATE TABLE " + accounts + " (id bigint PRIMARY KEY, balance bigint NOT NULL)",
        "CREATE TABLE " + ledger + " (message_id text PRIMARY KEY, account bigint NOT NULL, amount bigint NOT NULL)");
    return this;
  }

  void drop() {
    PostgresService.get().execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + ledger);
  }

  String[] reset() {
    return new String[]{
        "DELETE FROM " + ledger,
        "DELETE FROM " + accounts,
        "INSERT INTO " + accounts + " (id, balance) VALUES (1, 0), (2, 0), (3, 0)"};
  }

  String probe() {
    return "SELECT a.id, a.balance, (SELECT count(*) FROM " + ledger + " l WHERE l.account = a.id) AS entries"
        + " FROM " + accounts + " a ORDER BY a.id";
  }

  /** {@code count} payments spread over the three accounts, each keyed by its account. */
  static List<InMemoryDelivery<Payment>> payments(int count) {
    List<InMemoryDelivery<Payment>> payments = new ArrayList<>();
    IntStream.rangeClosed(1, count).forEach(i -> {
      long account = i % 3 + 1;
      payments.add(InMemoryDelivery.of("pay-" + i, new Payment(account, 10L * i)).withKey(String.valueOf(account)));
    });
    return payments;
  }

  /** The correct handler: both writes through the Tx. */
  Handler<Payment> credit() {
    return (payment, tx) -> tx.sql("UPDATE " + accounts + " SET balance = balance + $1 WHERE id = $2")
        .bind(0, payment.amount()).bind(1, payment.account()).execute()
        .then(tx.sql("INSERT INTO " + ledger + " (message_id, account, amount) VALUES ($1, $2, $3)")
            .bind(0, tx.messageId()).bind(1, payment.account()).bind(2, payment.amount()).execute());
  }

  /** The correct batch handler: set-based SQL over the batch, through the Tx. */
  BatchHandler<Payment> creditBatch() {
    return (items, tx) -> {
      String[] ids = items.stream().map(BatchItem -> BatchItem.messageId()).toArray(String[]::new);
      Long[] accountIds = items.stream().map(i -> i.payload().account()).toArray(Long[]::new);
      Long[] amounts = items.stream().map(i -> i.payload().amount()).toArray(Long[]::new);
      return tx.sql("UPDATE " + accounts + " a SET balance = a.balance + p.total FROM (SELECT account, sum(amount)"
          + " AS total FROM unnest($1::bigint[], $2::bigint[]) AS u(account, amount) GROUP BY account) p"
          + " WHERE a.id = p.account")
          .bind(0, accountIds).bind(1, amounts).execute()
          .then(tx.sql("INSERT INTO " + ledger + " (message_id, account, amount)"
              + " SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])")
              .bind(0, ids).bind(1, accountIds).bind(2, amounts).execute());
    };
  }
}
