package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import dev.idem.testing.TestDelivery;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;

/**
 * After a primary switch, a pooled connection may point at the demoted primary, now a read-only
 * standby: every write there fails with SQLSTATE 25006. Such a connection is closed, not handed
 * back to the pool, so the retry gets a new connection (which a multi-host URL opens on the new
 * primary), and the error is infrastructure: it spends none of the message's attempts. Here the
 * read-only node is a session made read-only by an earlier transaction on the pool's only connection.
 */
class ReadOnlyConnectionIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private ListAppender<ILoggingEvent> logs;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(1);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL)");
    logs = new ListAppender<>();
    logs.start();
    ((Logger) LoggerFactory.getLogger(IdempotentConsumer.class)).addAppender(logs);
  }

  @AfterEach
  void tearDown() {
    ((Logger) LoggerFactory.getLogger(IdempotentConsumer.class)).detachAppender(logs);
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  @Test
  void aConnectionThatTurnedReadOnlyIsDroppedFromThePoolAndTheMessageCommitsOnANewOneWithoutSpendingAttempts() {
    Handler<String> handler = (payload, tx) -> payload.equals("demote")
        // Committed with the first message: every later transaction of this session is read-only, like a demoted primary's.
        ? tx.sql("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").execute()
        : tx.sql("INSERT INTO " + effects + " (message_id) VALUES ($1)").bind(0, tx.messageId()).execute();
    IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(PostgresService.uniqueName("consumer"))
        .inbox(inbox).handler(handler).concurrency(1).maxBatchSize(1)
        .retry(
            RetryPolicy.backoff(2, Duration.ofMillis(5)).withInfrastructureBackoff(Duration.ofMillis(20), Duration.ofMillis(100)))
        .build();
    TestDelivery<String> write = TestDelivery.of("m-2", "write");

    List<Outcome<String>> outcomes = consumer.process(Flux.just(TestDelivery.of("m-1", "demote"), write))
        .take(2).collectList().block(TIMEOUT);

    assertThat(outcomes).extracting(Outcome::status).containsExactly(Outcome.Status.PROCESSED, Outcome.Status.PROCESSED);
    assertThat(write.ackCount()).isEqualTo(1);
    assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = 'm-2'")).isEqualTo(1);
    assertThat(logs.list).filteredOn(e -> e.getLevel() == Level.WARN)
        .extracting(ILoggingEvent::getFormattedMessage)
        .anySatisfy(m -> assertThat(m).contains("infrastructure unavailable while processing message 'm-2'").contains("25006"));
  }
}
