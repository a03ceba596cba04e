package dev.idem.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.Handler;
import dev.idem.test.Accounts.Payment;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The contract runner against the real PostgreSQL: a correct handler (per message and batch)
 * passes every schedule, and each classic mistake is caught and named.
 */
class HandlerContractIntegrationTests {

  private static ConnectionPool pool;
  private Accounts accounts;

  @BeforeAll
  static void pool() {
    pool = PostgresService.get().pool(8);
  }

  @AfterAll
  static void closePool() {
    pool.dispose();
  }

  @BeforeEach
  void tables() {
    accounts = new Accounts().create();
  }

  @AfterEach
  void dropTables() {
    accounts.drop();
  }

  private HandlerContract.Builder<Payment> contract(String name, Supplier<? extends Handler<Payment>> handlers) {
    return HandlerContract.forHandler(name, handlers)
        .postgres(pool)
        .reset(accounts.reset())
        .probe(accounts.probe())
        .messages(Accounts.payments(6));
  }

  @Test
  void aHandlerThatWritesOnlyThroughItsTxPassesEverySchedule() {
    ContractReport report = contract("credit", accounts::credit).build().verify();

    assertThat(report.passed()).isTrue();
    assertThat(report.schedulesRun()).extracting(ContractReport.ScheduleRun::schedule)
        .containsExactly(Schedule.values());
    assertThat(PostgresService.get().count("SELECT count(*) FROM " + HandlerContract.DEFAULT_INBOX_TABLE
        + " WHERE consumer LIKE 'idem_test_%' AND message_id = 'pay-1'"))
        .as("the runner removes its dedup rows").isZero();
  }

  @Test
  void aSetBasedBatchHandlerPassesEverySchedule() {
    ContractReport report = HandlerContract.forBatchHandler("credit batch", accounts::creditBatch)
        .postgres(PostgresService.get().url())
        .reset(accounts.reset())
        .probe(accounts.probe())
        .messages(Accounts.payments(6))
        .build()
        .verify();

    assertThat(report.passed()).isTrue();
  }

  @Test
  void anEffectWrittenOnAnotherConnectionIsReportedAsOutsideTheTransaction() {
    Handler<Payment> handler = (payment, tx) -> tx.sql("UPDATE " + accounts.accounts
        + " SET balance = balance + $1 WHERE id = $2").bind(0, payment.amount()).bind(1, payment.account()).execute()
        .then(Mono.usingWhen(pool.create(), other -> Mono.from(other.createStatement("INSERT INTO " + accounts.ledger
            + " (message_id, account, amount) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(0, tx.messageId()).bind(1, payment.account()).bind(2, payment.amount()).execute())
            .flatMap(result -> Mono.from(result.getRowsUpdated())), Connection::close));

    assertThatThrownBy(() -> contract("ledger on another connection", () -> handler).build().verify())
        .isInstanceOf(ContractViolation.class)
        .hasMessageContaining("EFFECT_OUTSIDE_TRANSACTION in schedule FAILURE_AFTER_EACH_STATEMENT")
        .hasMessageContaining("after the rolled-back attempt of message pay-1 (1 of 6), with a failure injected "
            + "after statement 1 of 1")
        .hasMessageContaining("write it through the Tx the handler is given");
  }

  @Test
  void aCallToAnOutsideSystemFromTheHandlerIsReportedAsOutsideTheOutbox() {
    AtomicLong gatewayCalls = new AtomicLong();
    Supplier<Handler<Payment>> handlers = () -> {
      Handler<Payment> credit = accounts.credit();
      return (payment, tx) -> Mono.from(credit.handle(payment, tx)).then(Mono.fromRunnable(gatewayCalls::incrementAndGet));
    };

    ContractReport report = contract("notifies the gateway", handlers).sideEffects(gatewayCalls::get).build().run();

    assertThat(report.mistakes()).containsExactly(Mistake.SIDE_EFFECT_OUTSIDE_OUTBOX);
    Finding finding = report.findings().get(0);
    assertThat(finding.schedule()).isEqualTo(Schedule.FAILURE_AFTER_EACH_STATEMENT);
    assertThat(finding.messageIds()).containsExactly("pay-1");
    assertThat(finding.actual()).isEqualTo("1 call");
  }

  /** Keeps each account's balance in memory and writes it: right only while one instance sees every message once. */
  private final class RunningTotals implements Handler<Payment> {
    private final Map<Long, Long> totals = new HashMap<>();

    @Override
    public Mono<Long> handle(Payment payment, dev.idem.Tx tx) {
      long total = totals.merge(payment.account(), payment.amount(), Long::sum);
      return tx.sql("UPDATE " + accounts.accounts + " SET balance = $1 WHERE id = $2")
          .bind(0, total).bind(1, payment.account()).execute()
          .then(tx.sql("INSERT INTO " + accounts.ledger + " (message_id, account, amount) VALUES ($1, $2, $3)")
              .bind(0, tx.messageId()).bind(1, payment.account()).bind(2, payment.amount()).execute());
    }
  }

  @Test
  void aHandlerThatKeepsBalancesInMemoryIsReportedAsKeepingState() {
    ContractReport report = contract("running totals in memory", RunningTotals::new).build().run();

    assertThat(report.mistakes()).contains(Mistake.STATE_KEPT_IN_MEMORY);
    Finding fresh = report.findings().get(0);
    assertThat(fresh.schedule()).isEqualTo(Schedule.FRESH_HANDLER_PER_MESSAGE);
    assertThat(fresh.messageIds()).as("the first message whose account had been paid before: account 2 again")
        .containsExactly("pay-4");
    assertThat(report.findings()).anySatisfy(f -> {
      assertThat(f.schedule()).isEqualTo(Schedule.FAILURE_AFTER_EACH_STATEMENT);
      assertThat(f.mistake()).isEqualTo(Mistake.STATE_KEPT_IN_MEMORY);
    });
  }

  @Test
  void aHandlerThatRemembersSeenIdsInMemoryIsCaughtByTheRetryAfterARollback() {
    Supplier<Handler<Payment>> handlers = () -> {
      Set<String> seen = new HashSet<>();
      Handler<Payment> credit = accounts.credit();
      return (payment, tx) -> seen.add(tx.messageId()) ? credit.handle(payment, tx) : Mono.empty();
    };

    ContractReport report = contract("dedup in memory", handlers).build().run();

    assertThat(report.mistakes()).containsExactly(Mistake.STATE_KEPT_IN_MEMORY);
    assertThat(report.findings().get(0).schedule()).isEqualTo(Schedule.FAILURE_AFTER_EACH_STATEMENT);
    assertThat(report.findings().get(0).messageIds()).containsExactly("pay-1");
  }

  @Test
  void aMessageIdRuleThatChangesOnRedeliveryIsReportedAsUnstable() {
    ContractReport report = contract("id from the delivery", accounts::credit)
        .messageId(delivery -> delivery.id() + "@" + delivery.deliveryAttempt())
        .build()
        .run();

    assertThat(report.mistakes()).contains(Mistake.UNSTABLE_MESSAGE_ID, Mistake.EFFECTS_DIVERGED);
    assertThat(report.findings().get(0).describe())
        .contains("UNSTABLE_MESSAGE_ID in schedule MESSAGE_ID_STABILITY", "pay-1@1, pay-1@1, pay-1@2");
    assertThat(report.findings()).anySatisfy(f -> {
      assertThat(f.schedule()).isEqualTo(Schedule.REDELIVERY_AFTER_COMMIT);
      assertThat(f.messageIds()).containsExactly("pay-1@1", "pay-1@2");
    });
  }

  @Test
  void aProbeThatReadsTheClockIsReportedBeforeAnyScheduleIsCompared() {
    ContractReport report = contract("credit", accounts::credit)
        .probe("SELECT clock_timestamp() AS read_at")
        .build()
        .run();

    assertThat(report.mistakes()).containsExactly(Mistake.PROBE_NOT_REPEATABLE);
    assertThat(report.schedulesRun()).extracting(ContractReport.ScheduleRun::schedule)
        .containsExactly(Schedule.CLEAN_RUN, Schedule.MESSAGE_ID_STABILITY);
  }

  @Test
  void aContractWithoutAProbeIsRefusedNamingTheSetting() {
    assertThatThrownBy(() -> HandlerContract.forHandler("credit", accounts::credit).postgres(pool)
        .reset(accounts.reset()).messages(Accounts.payments(1)).build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("probe(...) is required");
  }

  @Test
  void anUnreachableDatabaseIsReportedWithoutItsPassword() throws java.io.IOException {
    int closedPort;
    try (java.net.ServerSocket socket = new java.net.ServerSocket(0)) {
      closedPort = socket.getLocalPort();       // free once closed: nothing listens there
    }
    HandlerContract<Payment> contract = HandlerContract.forHandler("credit", accounts::credit)
        .postgres("r2dbc:postgresql://postgres:s3cret@127.0.0.1:" + closedPort + "/test")
        .reset(accounts.reset()).probe(accounts.probe()).messages(Accounts.payments(1))
        .build();

    assertThatThrownBy(contract::verify)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("could not create its inbox table idem_test_processed_messages")
        .hasMessageContaining("postgres:***@127.0.0.1:" + closedPort)
        .hasMessageNotContaining("s3cret");
  }
}
