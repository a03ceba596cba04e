package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.R2dbcNonTransientResourceException;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** What is the message's fault and what is not, on a real PostgreSQL. */
class FailureClassificationIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final RetryPolicy FAST = RetryPolicy.backoff(3, Duration.ofMillis(5))
      .withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(200));

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(4);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects);
    pool.dispose();
  }

  private Mono<Long> insertEffect(Tx tx) {
    return tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute();
  }

  private static ConsumerMetrics countingInfrastructureRetries(AtomicLong counter) {
    return new ConsumerMetrics() {
      @Override
      public void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {
        if (kind == ErrorKind.INFRASTRUCTURE) {
          counter.incrementAndGet();
        }
      }
    };
  }

  @Test
  void aMissingInboxTableIsInfrastructureNotTheMessagesFaultAndProcessingResumesOnceItExists() {
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox_later"));
    AtomicLong infrastructureRetries = new AtomicLong();
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    List<Outcome<String>> outcomes = new CopyOnWriteArrayList<>();
    Disposable running = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler((p, tx) -> insertEffect(tx))
        .retry(FAST).metrics(countingInfrastructureRetries(infrastructureRetries)).build()
        .process(Flux.just(delivery)).subscribe(outcomes::add);
    try {
      await().atMost(TIMEOUT).until(() -> infrastructureRetries.get() >= 5);
      assertThat(outcomes).isEmpty();
      assertThat(delivery.ackCount()).isZero();
      assertThat(delivery.deadLetter()).isNull();

      inbox.createSchemaIfAbsent().block(TIMEOUT);
      await().atMost(TIMEOUT).until(() -> outcomes.size() == 1);
    } finally {
      running.dispose();
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
    assertThat(outcomes.get(0).status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(1);
  }

  @Test
  void aTransactionThatHangsIsTimedOutRolledBackAndTriedAgain() {
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    Sinks.Empty<Void> never = Sinks.empty();
    AtomicInteger attempts = new AtomicInteger();
    AtomicLong infrastructureRetries = new AtomicLong();
    Handler<String> hangsOnce = (p, tx) -> insertEffect(tx).then(attempts.incrementAndGet() == 1 ? never.asMono() : Mono.empty());
    try {
      Outcome<String> outcome = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(hangsOnce)
          .retry(FAST).transactionTimeout(Duration.ofMillis(500)).metrics(countingInfrastructureRetries(infrastructureRetries))
          .build()
          .process(Flux.just(TestDelivery.of("m-1", "x"))).blockLast(TIMEOUT);

      assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
      assertThat(outcome.attempts()).isEqualTo(2);
      assertThat(infrastructureRetries.get()).isEqualTo(1);
      assertThat(postgres.count("SELECT count(*) FROM " + effects)).as("the hung attempt's insert was rolled back").isEqualTo(1);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
  }

  @Test
  void alternatingRetryableAndInfrastructureFailuresStillEndInADeadLetter() {
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    AtomicInteger calls = new AtomicInteger();
    Handler<String> alternating = (p, tx) -> calls.incrementAndGet() % 2 == 1
        ? Mono.error(new IllegalStateException("bug"))
        : Mono.error(new R2dbcNonTransientResourceException("connection reset"));
    TestDelivery<String> delivery = TestDelivery.of("m-1", "x");
    try {
      Outcome<String> outcome = IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(alternating).retry(FAST).build()
          .process(Flux.just(delivery)).blockLast(TIMEOUT);

      assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
      assertThat(delivery.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
      assertThat(delivery.deadLetter().errorMessage()).isEqualTo("bug");
      assertThat(calls.get()).as("3 retryable failures with 2 infrastructure failures between them").isEqualTo(5);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
  }

  @Test
  void aParseErrorThatIsAnIoExceptionIsDeadLetteredNotRetriedForever() {
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    class JsonParseException extends IOException {
      private static final long serialVersionUID = 1L;

      JsonParseException(String message) {
        super(message);
      }
    }
    TestDelivery<String> delivery = TestDelivery.of("m-1", "{oops");
    try {
      Outcome<String> outcome = IdempotentConsumer.<String>named(consumer).inbox(inbox)
          .handler((p, tx) -> Mono.error(new JsonParseException("Unexpected character 'o'")))
          .retry(FAST).build().process(Flux.just(delivery)).blockLast(TIMEOUT);

      assertThat(outcome.status()).isEqualTo(Outcome.Status.DEAD_LETTERED);
      assertThat(delivery.deadLetter().reason()).isEqualTo(DeadLetterReason.RETRIES_EXHAUSTED);
      assertThat(delivery.deadLetter().attempts()).isEqualTo(3);
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
  }

  @Test
  void idsPostgresCannotStoreAndDeliveriesThatFailToDescribeThemselvesAreDeadLetteredAndTheStreamGoesOn() {
    PostgresInbox inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    TestDelivery<String> nul = TestDelivery.of("bad\0id", "x");
    AbstractDelivery<String> broken = new AbstractDelivery<>() {
      @Override
      public String id() {
        throw new IllegalStateException("header bytes are not UTF-8");
      }

      @Override
      public String payload() {
        return "x";
      }

      @Override
      public String orderingKey() {
        throw new IllegalStateException("no key either");
      }

      @Override
      protected Mono<Void> doAck() {
        return Mono.empty();
      }

      @Override
      protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
        return Mono.empty();
      }
    };
    TestDelivery<String> good = TestDelivery.of("good", "x");
    try {
      List<Outcome<String>> outcomes = IdempotentConsumer.<String>named(consumer).inbox(inbox)
          .handler((p, tx) -> insertEffect(tx))
          .retry(FAST).build().process(Flux.just(nul, broken, good)).collectList().block(TIMEOUT);

      assertThat(outcomes).extracting(Outcome::status)
          .containsExactly(Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED, Outcome.Status.PROCESSED);
      assertThat(nul.deadLetter().reason()).isEqualTo(DeadLetterReason.INVALID_ID);
      assertThat(outcomes.get(1).deadLetter().detail()).contains("header bytes are not UTF-8");
      assertThat(postgres.column("SELECT message_id FROM " + effects)).containsExactly("good");
    } finally {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table());
    }
  }
}
