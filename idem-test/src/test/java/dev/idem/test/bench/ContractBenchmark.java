package dev.idem.test.bench;

import dev.idem.Handler;
import dev.idem.test.ContractReport;
import dev.idem.test.HandlerContract;
import dev.idem.test.InMemoryDelivery;
import dev.idem.testing.PostgresService;
import java.util.ArrayList;
import java.util.List;

/**
 * How long the full schedule set takes for a sample of messages (100 by default) on a real
 * PostgreSQL, with a handler of two statements (an UPDATE and a ledger INSERT); no broker. Prints
 * each schedule's deliveries and time, for a first run in a fresh JVM and a second one.
 *
 * <p>Run: {@value #COMMAND}
 */
public final class ContractBenchmark {

  static final String COMMAND = "mvn -q -pl idem-test -am test-compile exec:java -Didem.contractBenchmark.skip=false [-Dmessages=100]";

  private ContractBenchmark() {}

  record Payment(long account, long amount) {}

  /**
   * Runs the contract twice and prints the timings.
   *
   * @param args unused; {@code -Dmessages=N} sets the sample size
   */
  public static void main(String[] args) {
    int messages = Integer.getInteger("messages", 100);
    PostgresService postgres = PostgresService.get();
    String accounts = PostgresService.uniqueName("bench_accounts");
    String ledger = PostgresService.uniqueName("bench_ledger");
    postgres.execute("CREATE TABLE " + accounts + " (id bigint PRIMARY KEY, balance bigint NOT NULL)",
        "CREATE TABLE " + ledger + " (message_id text PRIMARY KEY, account bigint NOT NULL, amount bigint NOT NULL)");
    try {
      List<InMemoryDelivery<Payment>> sample = new ArrayList<>();
      for (int i = 1; i <= messages; i++) {
        long account = i % 10 + 1;
        sample.add(InMemoryDelivery.of("pay-" + i, new Payment(account, i)).withKey(String.valueOf(account)));
      }
      Handler<Payment> credit = (payment, tx) -> tx.sql("UPDATE " + accounts + " SET balance = balance + $1 WHERE id = $2")
          .bind(0, payment.amount()).bind(1, payment.account()).execute()
          .then(tx.sql("INSERT INTO " + ledger + " (message_id, account, amount) VALUES ($1, $2, $3)")
              .bind(0, tx.messageId()).bind(1, payment.account()).bind(2, payment.amount()).execute());
      HandlerContract<Payment> contract = HandlerContract.forHandler("credit", () -> credit)
          .postgres(postgres.url())
          .reset("DELETE FROM " + ledger, "DELETE FROM " + accounts,
              "INSERT INTO " + accounts + " (id, balance) SELECT g, 0 FROM generate_series(1, 10) g")
          .probe("SELECT id, balance, (SELECT count(*) FROM " + ledger + " l WHERE l.account = a.id) AS entries FROM "
              + accounts + " a ORDER BY id")
          .messages(sample)
          .build();
      System.out.println("# idem-test: the full schedule set for " + messages + " messages, PostgreSQL at "
          + postgres.url());
      System.out.println("# command: " + COMMAND);
      for (String run : List.of("first run (cold JVM)", "second run")) {
        ContractReport report = contract.verify();
        System.out.printf("%n## %s: %d ms, %d deliveries%n", run, report.elapsed().toMillis(),
            report.schedulesRun().stream().mapToInt(ContractReport.ScheduleRun::deliveries).sum());
        System.out.printf("%-34s %10s %8s%n", "schedule", "deliveries", "ms");
        report.schedulesRun().forEach(s -> System.out.printf("%-34s %10d %8d%n", s.schedule(), s.deliveries(),
            s.elapsed().toMillis()));
      }
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + accounts, "DROP TABLE IF EXISTS " + ledger);
    }
  }
}
