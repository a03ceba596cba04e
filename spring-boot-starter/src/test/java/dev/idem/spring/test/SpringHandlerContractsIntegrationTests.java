package dev.idem.spring.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.postgres.PostgresInbox;
import dev.idem.spring.testapp.Effect;
import dev.idem.spring.testapp.EffectRepository;
import dev.idem.spring.testapp.EffectService;
import dev.idem.spring.testapp.TestApplication;
import dev.idem.test.ContractReport;
import dev.idem.test.Finding;
import dev.idem.test.HandlerContract;
import dev.idem.test.InMemoryDelivery;
import dev.idem.test.Mistake;
import dev.idem.test.Schedule;
import dev.idem.testing.PostgresService;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.reactive.TransactionSynchronization;
import org.springframework.transaction.reactive.TransactionSynchronizationManager;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@link SpringHandlerContracts} on the real PostgreSQL, in a Spring Boot application: Spring Data
 * R2DBC repository writes and {@code @Transactional} services join the contract's transaction and
 * count as the handler's statements (the injected failure after each rolls it back), a write
 * subscribed outside the handler's context or a {@code REQUIRES_NEW} service's commits on its own
 * connection and is caught, and a participating transaction that failed rolls the message back as
 * under the starter's runner. Everything runs in a schema of this test's own (the URL's
 * {@code schema}, PostgreSQL's {@code search_path}).
 */
@SpringBootTest(classes = TestApplication.class)
class SpringHandlerContractsIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final String SCHEMA = PostgresService.uniqueName("spring_contracts");
  private static final String EFFECTS = SCHEMA + "." + Effect.TABLE;

  @DynamicPropertySource
  static void postgres(DynamicPropertyRegistry registry) {
    PG.execute("CREATE SCHEMA " + SCHEMA,
        "CREATE TABLE " + EFFECTS + " (id bigserial PRIMARY KEY, message_id text NOT NULL, note text NOT NULL)");
    registry.add("spring.r2dbc.url", () -> PG.url() + (PG.url().contains("?") ? "&" : "?") + "schema=" + SCHEMA);
    registry.add("spring.r2dbc.pool.initial-size", () -> "1");
  }

  @AfterAll
  static void dropSchema() {
    PG.execute("DROP SCHEMA IF EXISTS " + SCHEMA + " CASCADE");
  }

  @Autowired ConnectionFactory connectionFactory;
  @Autowired EffectRepository effects;
  @Autowired EffectService service;
  @Autowired DatabaseClient db;

  @BeforeEach
  void empty() {
    PG.execute("DELETE FROM " + EFFECTS);
  }

  /** Three messages of different keys, each one a note. */
  private static List<InMemoryDelivery<String>> messages() {
    return List.of(InMemoryDelivery.of("m-1", "a").withKey("1"), InMemoryDelivery.of("m-2", "b").withKey("2"),
        InMemoryDelivery.of("m-3", "c").withKey("3"));
  }

  private HandlerContract.Builder<String> joinedContract(String name, Handler<String> handler) {
    return SpringHandlerContracts.forHandler(name, () -> handler, connectionFactory)
        .reset("DELETE FROM " + Effect.TABLE)
        .probe("SELECT message_id, note FROM " + Effect.TABLE + " ORDER BY message_id, note")
        .messages(messages());
  }

  private static int deliveries(ContractReport report, Schedule schedule) {
    return report.schedulesRun().stream().filter(run -> run.schedule() == schedule)
        .mapToInt(ContractReport.ScheduleRun::deliveries).sum();
  }

  private List<Object> rows() {
    return PG.column("SELECT message_id || ':' || note FROM " + EFFECTS + " ORDER BY message_id, note");
  }

  @Test
  void repositoryWritesJoinTheMessagesTransactionAndEachIsCountedWhereTheFailuresAreInjected() {
    Handler<String> twoWrites = (note, tx) -> effects.save(new Effect(null, tx.messageId(), note))
        .then(effects.save(new Effect(null, tx.messageId(), note + "-audit")));

    ContractReport report = joinedContract("two repository writes", twoWrites).build().verify();

    // Two statements counted per message: a failure after each (two rolled-back attempts), then the retry.
    assertThat(deliveries(report, Schedule.FAILURE_AFTER_EACH_STATEMENT)).isEqualTo(3 * (2 + 1));
    // The last schedule ends with every message applied once.
    assertThat(rows()).containsExactly("m-1:a", "m-1:a-audit", "m-2:b", "m-2:b-audit", "m-3:c", "m-3:c-audit");

    // The same handler, not joined: its repositories write in autocommit on connections of their own.
    ContractReport bare = HandlerContract.forHandler("two repository writes, not joined", () -> twoWrites)
        .postgres(connectionFactory)
        .reset("DELETE FROM " + Effect.TABLE)
        .probe("SELECT message_id, note FROM " + Effect.TABLE + " ORDER BY message_id, note")
        .messages(messages())
        .build().run();
    assertThat(bare.mistakes()).contains(Mistake.EFFECT_OUTSIDE_TRANSACTION);
  }

  @Test
  void aWriteSubscribedOutsideTheHandlersContextTakesItsOwnConnectionAndIsCaught() {
    Handler<String> leaks = (note, tx) -> effects.save(new Effect(null, tx.messageId(), note))
        // toFuture() subscribes without the handler's context: no transaction there, a pool connection in autocommit.
        .then(Mono.fromFuture(() -> effects.save(new Effect(null, tx.messageId(), note + "-outside")).toFuture()));

    ContractReport report = joinedContract("a write outside the context", leaks).build().run();

    assertThat(report.passed()).isFalse();
    Finding finding = report.findings().get(0);
    assertThat(finding.mistake()).isEqualTo(Mistake.EFFECT_OUTSIDE_TRANSACTION);
    assertThat(finding.schedule()).isEqualTo(Schedule.FAILURE_AFTER_EACH_STATEMENT);
    // The joined write is the one statement counted; the failure after it left the other write behind.
    assertThat(finding.step()).contains("after statement 1 of 1");
    assertThat(finding.messageIds()).containsExactly("m-1");
  }

  @Test
  void aTransactionalServiceJoinsTheMessagesTransactionAndItsStatementsAreCounted() {
    Handler<String> callsService = (note, tx) -> effects.save(new Effect(null, tx.messageId(), note))
        .then(service.record(tx.messageId(), note + "-service", false));

    ContractReport report = joinedContract("a @Transactional service", callsService).build().verify();

    assertThat(deliveries(report, Schedule.FAILURE_AFTER_EACH_STATEMENT)).isEqualTo(3 * (2 + 1));
    assertThat(rows()).containsExactly("m-1:a", "m-1:a-service", "m-2:b", "m-2:b-service", "m-3:c", "m-3:c-service");
  }

  @Test
  void aRequiresNewServiceCommitsOnItsOwnConnectionAndIsCaught() {
    Handler<String> ownTransaction = (note, tx) -> effects.save(new Effect(null, tx.messageId(), note))
        .then(service.recordOnItsOwn(tx.messageId(), note + "-own"));

    ContractReport report = joinedContract("a REQUIRES_NEW service", ownTransaction).build().run();

    Finding finding = report.findings().get(0);
    assertThat(finding.mistake()).isEqualTo(Mistake.EFFECT_OUTSIDE_TRANSACTION);
    assertThat(finding.schedule()).isEqualTo(Schedule.FAILURE_AFTER_EACH_STATEMENT);
    assertThat(finding.step()).contains("after statement 1 of 1");
    assertThat(finding.actual()).contains("a-own");
  }

  @Test
  void aFailedTransactionalServiceThatTheHandlerSwallowsRollsTheMessageBack() {
    Handler<String> swallows = (note, tx) -> effects.save(new Effect(null, tx.messageId(), note))
        .then(service.record(tx.messageId(), note + "-service", note.equals("fail")))
        .onErrorResume(IllegalStateException.class, e -> Mono.empty());

    List<Outcome<String>> outcomes = pipeline(swallows)
        .process(Flux.just(InMemoryDelivery.of("r-1", "fail"), InMemoryDelivery.of("r-2", "ok")))
        .collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(o -> o.delivery().id(), Outcome::status)
        .containsExactlyInAnyOrder(tuple("r-1", Outcome.Status.DEAD_LETTERED),
            tuple("r-2", Outcome.Status.PROCESSED));
    Outcome<String> failed = outcomes.stream().filter(o -> o.delivery().id().equals("r-1")).findFirst().orElseThrow();
    assertThat(failed.deadLetter().detail()).contains("rollback-only");
    // Neither the handler's write nor the service's survived for r-1; r-2 committed both.
    assertThat(rows()).containsExactly("r-2:ok", "r-2:ok-service");
  }

  @Test
  void synchronizationIsActiveAndBeforeCommitCallbacksWriteInTheMessagesTransaction() {
    AtomicBoolean active = new AtomicBoolean();
    AtomicInteger beforeCommit = new AtomicInteger();
    Handler<String> registers = (note, tx) -> TransactionSynchronizationManager.forCurrentTransaction()
        .doOnNext(sync -> {
          active.set(sync.isSynchronizationActive() && sync.isActualTransactionActive());
          sync.registerSynchronization(new TransactionSynchronization() {
            @Override
            public Mono<Void> beforeCommit(boolean readOnly) {
              beforeCommit.incrementAndGet();
              return db.sql("INSERT INTO " + Effect.TABLE + " (message_id, note) VALUES (:id, 'before-commit')")
                  .bind("id", tx.messageId()).fetch().rowsUpdated().then();
            }
          });
        })
        .then(effects.save(new Effect(null, tx.messageId(), note)));

    Outcome<String> outcome = pipeline(registers).process(Flux.just(InMemoryDelivery.of("s-1", "x"))).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(active).isTrue();
    assertThat(beforeCommit).hasValue(1);
    assertThat(rows()).containsExactly("s-1:before-commit", "s-1:x");
  }

  /** A pipeline of plain R2DBC transactions (the default runner) on the application's pool, no retries. */
  private IdempotentConsumer<String> pipeline(Handler<String> handler) {
    PostgresInbox inbox = PostgresInbox.create(connectionFactory, "join_inbox");
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    return IdempotentConsumer.<String>named(PostgresService.uniqueName("join"))
        .inbox(inbox)
        .retry(RetryPolicy.none())
        .handler(SpringHandlerContracts.joined(handler, connectionFactory))
        .build();
  }
}
