package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.AbstractDelivery;
import dev.idem.ConsumerMetrics;
import dev.idem.DeadLetter;
import dev.idem.DeadLetterReason;
import dev.idem.Delivery;
import dev.idem.ErrorClassifier;
import dev.idem.ErrorKind;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.ServerTimeouts;
import dev.idem.postgres.PostgresInbox;
import dev.idem.spring.testapp.Effect;
import dev.idem.spring.testapp.EffectRepository;
import dev.idem.spring.testapp.TestApplication;
import dev.idem.testing.PostgresService;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.R2dbcException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.r2dbc.connection.R2dbcTransactionManager;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.reactive.TransactionalOperator;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@link SpringTransactionRunner} in a Spring Boot application on the real PostgreSQL: repositories,
 * {@code DatabaseClient} and {@code @Transactional}-style participants join the message's
 * transaction, and every path of the {@code TransactionRunner} contract holds.
 */
@SpringBootTest(classes = TestApplication.class)
class SpringTransactionRunnerIntegrationTests {

  private static final PostgresService PG = PostgresService.get();
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  /** This test's own pool, told apart from other sessions on the server. */
  private static final String APPLICATION_NAME = PostgresService.uniqueName("idem_spring_runner");

  @DynamicPropertySource
  static void r2dbc(DynamicPropertyRegistry registry) {
    registry.add("spring.r2dbc.url",
        () -> PG.url() + (PG.url().contains("?") ? "&" : "?") + "applicationName=" + APPLICATION_NAME);
    registry.add("spring.r2dbc.pool.max-size", () -> "8");
    registry.add("spring.r2dbc.pool.initial-size", () -> "1");
  }

  @Autowired ConnectionFactory connectionFactory;
  @Autowired EffectRepository effects;
  @Autowired DatabaseClient db;
  @Autowired PostgresInbox inbox;

  private String consumer;

  @BeforeEach
  void schema() {
    PG.execute(Effect.DDL);
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    consumer = PostgresService.uniqueName("spring_runner");
  }

  private IdempotentConsumer.Builder<String> pipeline(Handler<String> handler, Duration transactionTimeout) {
    return IdempotentConsumer.<String>named(consumer)
        .inbox(inbox)
        .transactionRunner(new SpringTransactionRunner(connectionFactory, ServerTimeouts.derivedFrom(transactionTimeout)))
        .transactionTimeout(transactionTimeout)
        .retry(new RetryPolicy(3, Duration.ofMillis(10), Duration.ofMillis(50), Duration.ofMillis(10), Duration.ofMillis(100)))
        .handler(handler);
  }

  private long effectsOf(String messageId) {
    return PG.count("SELECT count(*) FROM " + Effect.TABLE + " WHERE message_id = $1", messageId);
  }

  private long inboxRows(String messageId) {
    return PG.count("SELECT count(*) FROM processed_messages WHERE consumer = $1 AND message_id = $2", consumer, messageId);
  }

  @Test
  void aRepositoryWriteCommitsWithTheDedupRowBeforeTheMessageIsAcknowledged() {
    String id = PostgresService.uniqueName("m");
    ObservingDelivery delivery = new ObservingDelivery(id, "hello");
    Handler<String> handler = (payload, tx) -> effects.save(new Effect(null, tx.messageId(), payload));

    List<Outcome<String>> outcomes = pipeline(handler, Duration.ofSeconds(30)).build()
        .process(Flux.just(delivery, new ObservingDelivery(id, "again"))).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::status).containsExactly(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE);
    // Seen by another connection at the moment of the acknowledgement: committed, both rows.
    assertThat(delivery.seenAtAck).containsExactly(1L, 1L);
    assertThat(effectsOf(id)).isEqualTo(1);
  }

  @Test
  void databaseClientAndEntityTemplateWritesJoinTheTransactionAndRollBackWithIt() {
    String id = PostgresService.uniqueName("m");
    ObservingDelivery delivery = new ObservingDelivery(id, "x");
    Handler<String> handler = (payload, tx) -> db
        .sql("INSERT INTO " + Effect.TABLE + " (message_id, note) VALUES (:id, 'client')")
        .bind("id", tx.messageId()).fetch().rowsUpdated()
        .then(effects.save(new Effect(null, tx.messageId(), "repository")))
        .then(Mono.error(new NonRetryableException("refused after writing")));

    Outcome<String> outcome = pipeline(handler, Duration.ofSeconds(30)).build().process(Flux.just(delivery)).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(outcome.deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
    assertThat(effectsOf(id)).isZero();
    assertThat(inboxRows(id)).isZero();
  }

  @Test
  void aHandlerThatSwallowsAnSqlErrorIsTheMessagesFaultNotInfrastructure() {
    String id = PostgresService.uniqueName("m");
    AtomicLong infrastructureRetries = new AtomicLong();
    ObservingDelivery delivery = new ObservingDelivery(id, "x");
    Handler<String> swallows = (payload, tx) -> effects.save(new Effect(null, tx.messageId(), payload))
        .then(db.sql("SELECT 1 / 0").fetch().rowsUpdated().onErrorResume(e -> Mono.empty()));

    Outcome<String> outcome = pipeline(swallows, Duration.ofSeconds(30)).metrics(countingInfrastructure(infrastructureRetries))
        .build()
        .process(Flux.just(delivery)).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(outcome.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
    assertThat(outcome.deadLetter().detail()).contains("ROLLBACK");
    assertThat(infrastructureRetries.get()).isZero();
    assertThat(effectsOf(id)).isZero();
    assertThat(inboxRows(id)).isZero();
  }

  @Test
  void aFailedParticipatingTransactionThatTheHandlerSwallowsRollsTheMessageBack() {
    String id = PostgresService.uniqueName("m");
    AtomicLong infrastructureRetries = new AtomicLong();
    // What a @Transactional service method on the application's transaction manager does.
    TransactionalOperator service = TransactionalOperator.create(new R2dbcTransactionManager(connectionFactory));
    Handler<String> handler = (payload, tx) -> effects.save(new Effect(null, tx.messageId(), payload))
        .then(service.transactional(effects.save(new Effect(null, tx.messageId(), "inner"))
            .then(Mono.error(new IllegalStateException("the service failed")))))
        .onErrorResume(IllegalStateException.class, e -> Mono.empty());

    Outcome<String> outcome = pipeline(handler, Duration.ofSeconds(30)).metrics(countingInfrastructure(infrastructureRetries))
        .build()
        .process(Flux.just(new ObservingDelivery(id, "x"))).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
    assertThat(outcome.deadLetter().detail()).contains("rollback-only");
    assertThat(infrastructureRetries.get()).isZero();
    assertThat(effectsOf(id)).isZero();
    assertThat(inboxRows(id)).isZero();
  }

  @Test
  void aTransactionPastItsTimeoutIsRolledBackAndTheMessageAppliedOnceByTheNextAttempt() {
    // The server's statement_timeout (derived from the 2 s transaction timeout) stops the statement.
    slowFirstAttemptIsRolledBack(
        new SpringTransactionRunner(connectionFactory, ServerTimeouts.derivedFrom(Duration.ofSeconds(2))));
  }

  @Test
  void aTransactionCancelledByTheClientTimeoutHasItsStatementCancelledAndIsRolledBack() {
    // No server-side guard: the pipeline's timeout cancels the attempt, the runner sends a cancel
    // request for the running statement, then ROLLBACK.
    slowFirstAttemptIsRolledBack(new SpringTransactionRunner(connectionFactory, ServerTimeouts.none()));
  }

  private void slowFirstAttemptIsRolledBack(SpringTransactionRunner runner) {
    String id = PostgresService.uniqueName("m");
    String marker = "sleep_" + id;
    AtomicInteger attempts = new AtomicInteger();
    Handler<String> slowFirst = (payload, tx) -> effects
        .save(new Effect(null, tx.messageId(), "attempt " + attempts.incrementAndGet()))
        .then(attempts.get() == 1 ? db.sql("SELECT pg_sleep(30), '" + marker + "'").fetch().rowsUpdated().then() : Mono.empty());

    Outcome<String> outcome = IdempotentConsumer.<String>named(consumer)
        .inbox(inbox)
        .transactionRunner(runner)
        .transactionTimeout(Duration.ofSeconds(2))
        .retry(new RetryPolicy(3, Duration.ofMillis(10), Duration.ofMillis(50), Duration.ofMillis(10), Duration.ofMillis(100)))
        .handler(slowFirst)
        .build()
        .process(Flux.just(new ObservingDelivery(id, "x"))).blockLast(TIMEOUT);

    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(attempts.get()).isGreaterThanOrEqualTo(2);
    assertThat(PG.column("SELECT note FROM " + Effect.TABLE + " WHERE message_id = $1", id))
        .containsExactly("attempt " + attempts.get());
    assertThat(inboxRows(id)).isEqualTo(1);
    // The slow statement is not running any more (30 s would not have passed), and none of this
    // test's pooled connections is left inside a transaction.
    assertThat(
        PG.count("SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()",
            "%" + marker + "%"))
        .isZero();
    assertThat(PG.count("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
        APPLICATION_NAME)).isZero();
  }

  @Test
  void aFailedBeginArrivesAsTheDriversErrorAndIsClassifiedAsInfrastructure() {
    ConnectionFactory unreachable = ConnectionFactories.get(PG.urlVia("127.0.0.1", 1));
    SpringTransactionRunner runner = new SpringTransactionRunner(unreachable);

    Throwable error = runner.inTransaction(connection -> Mono.just(1)).map(Object.class::cast)
        .onErrorResume(e -> Mono.just(e)).block(TIMEOUT) instanceof Throwable t ? t : null;

    assertThat(error).isNotNull();
    assertThat(error.getClass().getName()).doesNotStartWith("org.springframework");
    assertThat(ErrorClassifier.defaults().classify(error)).isEqualTo(ErrorKind.INFRASTRUCTURE);
  }

  @Test
  void anEmptyResultIsEmittedAfterCommitAndTheWorksErrorPropagatesAsItWas() {
    SpringTransactionRunner runner = new SpringTransactionRunner(connectionFactory);
    assertThat(runner.inTransaction(connection -> Mono.<String>empty()).blockOptional(TIMEOUT)).isEmpty();

    R2dbcException fromWork = new io.r2dbc.spi.R2dbcNonTransientResourceException("from the work");
    Throwable error = runner.inTransaction(connection -> Mono.<String>error(fromWork)).map(Object.class::cast)
        .onErrorResume(e -> Mono.just(e)).block(TIMEOUT) instanceof Throwable t ? t : null;
    assertThat(error).isSameAs(fromWork);
  }

  private static ConsumerMetrics countingInfrastructure(AtomicLong counter) {
    return new ConsumerMetrics() {
      @Override
      public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
        if (kind == ErrorKind.INFRASTRUCTURE) {
          counter.incrementAndGet();
        }
      }
    };
  }

  /** A delivery whose acknowledgement looks, through a separate connection, at what is committed. */
  private final class ObservingDelivery extends AbstractDelivery<String> {
    final String id;
    final String payload;
    final List<Long> seenAtAck = new CopyOnWriteArrayList<>();

    ObservingDelivery(String id, String payload) {
      this.id = id;
      this.payload = payload;
    }

    @Override
    public String id() {
      return id;
    }

    @Override
    public String payload() {
      return payload;
    }

    @Override
    public Throwable decodingFailure() {
      return null;
    }

    @Override
    public String orderingKey() {
      return id;
    }

    @Override
    public Instant timestamp() {
      return Instant.EPOCH;
    }

    @Override
    public int deliveryAttempt() {
      return 1;
    }

    @Override
    public Map<String, String> headers() {
      return Map.of();
    }

    @Override
    protected Mono<Void> doAck() {
      return Mono.usingWhen(PG.connectionFactory().create(),
          c -> Flux.from(c.createStatement("SELECT (SELECT count(*) FROM " + Effect.TABLE + " WHERE message_id = $1),"
              + " (SELECT count(*) FROM processed_messages WHERE consumer = $2 AND message_id = $1)")
              .bind(0, id).bind(1, consumer).execute())
              .concatMap(r -> r.map((row, meta) -> List.of(row.get(0, Long.class), row.get(1, Long.class))))
              .doOnNext(seenAtAck::addAll)
              .then(),
          c -> c.close());
    }

    @Override
    protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
      return Mono.empty();
    }
  }
}
