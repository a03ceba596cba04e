package dev.idem.test;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.DeadLetterReason;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The in-memory delivery and source through the real pipeline: each delivery records how the
 * pipeline settled it, and a delivery the pipeline never reached stays unsettled.
 */
class InMemorySourceIntegrationTests {

  private final ConnectionPool pool = PostgresService.get().pool(4);

  @AfterEach
  void closePool() {
    pool.dispose();
  }

  private IdempotentConsumer<String> consumer() {
    PostgresInbox inbox = PostgresInbox.create(pool, HandlerContract.DEFAULT_INBOX_TABLE);
    inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
    return IdempotentConsumer.<String>named(PostgresService.uniqueName("kit_source"))
        .inbox(inbox)
        .handler((payload, tx) -> payload.equals("poison")
            ? Mono.error(new NonRetryableException("poison"))
            : tx.sql("SELECT 1").execute())
        .build();
  }

  @Test
  void eachDeliveryRecordsHowThePipelineSettledIt() {
    InMemoryDelivery<String> first = InMemoryDelivery.of("m-1", "hello");
    InMemorySource<String> source = InMemorySource.of(first, first.redelivered(),
        InMemoryDelivery.of("m-2", "poison"), InMemoryDelivery.of(null, "no id"));

    List<Outcome.Status> outcomes = consumer().process(source.receive()).map(Outcome::status).collectList()
        .block(Duration.ofSeconds(60));

    assertThat(outcomes).containsExactlyInAnyOrder(Outcome.Status.PROCESSED, Outcome.Status.DUPLICATE,
        Outcome.Status.DEAD_LETTERED, Outcome.Status.DEAD_LETTERED);
    List<InMemoryDelivery<String>> sent = source.sent();
    assertThat(sent.get(0).isAcked()).isTrue();
    assertThat(sent.get(1).settledAs()).isEqualTo("ack");
    assertThat(sent.get(1).deliveryAttempt()).isEqualTo(2);
    assertThat(sent.get(2).deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
    assertThat(sent.get(3).settledAs()).isEqualTo("dead letter: MISSING_ID");
    assertThat(source.unsettled()).isEmpty();
  }

  @Test
  void aDeliveryTheStoppedPipelineNeverSettledIsListedAsUnsettled() {
    InMemorySource<String> source = new InMemorySource<>();
    source.send(InMemoryDelivery.of("m-1", "hello"));

    Outcome<String> outcome = consumer().process(source.receive()).next().block(Duration.ofSeconds(60));
    InMemoryDelivery<String> late = source.send(InMemoryDelivery.of("m-2", "after the stop"));

    assertThat(outcome.status()).isEqualTo(Outcome.Status.PROCESSED);
    assertThat(source.unsettled()).containsExactly(late);
  }
}
