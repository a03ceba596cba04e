package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import dev.idem.Delivery;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.rabbit.testing.RabbitService;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Mono;

/** The source against the real RabbitMQ and PostgreSQL: dedup, crash between commit and ack, prefetch. */
class RabbitSourceIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 32})
  void fiveThousandMessagesWithTenPercentPublishedTwiceHaveExactlyFiveThousandEffects(int maxBatchSize) throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_dedup", RabbitTopology.QueueType.CLASSIC)) {
      int unique = 5_000;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < unique; i++) {
        messages.add(RabbitService.message("m-" + i, "body-" + i));
        if (i % 10 == 0) {
          messages.add(RabbitService.message("m-" + i, "body-" + i));
        }
      }
      f.rabbit.publish(f.queue, messages);
      RabbitSource<String> source = f.source(f.options().prefetch(64).build());
      f.run(source, f.consumer(f.recordingHandler()).concurrency(16).prefetch(64).ordering(Ordering.UNORDERED)
          .maxBatchSize(maxBatchSize).build());

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500)).untilAsserted(() -> {
        assertThat(f.outcomes(Outcome.Status.PROCESSED) + f.outcomes(Outcome.Status.DUPLICATE)).isEqualTo(messages.size());
      });
      assertThat(f.outcomes(Outcome.Status.PROCESSED)).isEqualTo(unique);
      assertThat(f.outcomes(Outcome.Status.DUPLICATE)).isEqualTo(messages.size() - unique);
      assertThat(f.outcomes(Outcome.Status.DEAD_LETTERED)).isZero();
      assertThat(f.effectRows()).isEqualTo(unique);
      assertThat(f.distinctEffects()).isEqualTo(unique);
      assertThat(source.unsettled()).as("deliveries not yet acked").isZero();
      assertThat(source.peakUnsettled()).isLessThanOrEqualTo(64);
      System.out.printf("dedup: %d processed, %d duplicates, peak unacked %d%n",
          f.outcomes(Outcome.Status.PROCESSED), f.outcomes(Outcome.Status.DUPLICATE), source.peakUnsettled());

      f.stopConsumers();
      // Closing the connection requeues anything unacknowledged: an empty queue now proves every
      // delivery was acked.
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).isZero();
    }
  }

  @ParameterizedTest(name = "maxBatchSize {0}")
  @ValueSource(ints = {1, 32})
  void crashBetweenCommitAndAckRedeliversDuplicatesThatAreAckedWithOneEffectEach(int maxBatchSize) throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_crash", RabbitTopology.QueueType.CLASSIC)) {
      int count = 40;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        messages.add(RabbitService.message("c-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);

      // First life: every transaction commits, then the process "dies" before any ack.
      RabbitSource<String> first = f.source(f.options().prefetch(64).build());
      IdempotentConsumer<String> pipeline = f.consumer(f.recordingHandler()).maxBatchSize(maxBatchSize).build();
      f.run(first.receive().<Delivery<String>>map(LostAck::new), pipeline);
      await().atMost(PATIENCE).until(() -> f.effectRows() == count);
      assertThat(f.outcomes).isEmpty();
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).as("unacked messages back in the queue").isEqualTo(count);

      // Second life: the broker redelivers; the inbox recognises every message.
      RabbitSource<String> second = f.source(f.options().prefetch(64).build());
      f.run(second, pipeline);
      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.DUPLICATE) == count);
      assertThat(f.outcomes(Outcome.Status.PROCESSED)).isZero();
      assertThat(f.settled).allSatisfy(o -> assertThat(o.delivery().deliveryAttempt()).isGreaterThanOrEqualTo(2));
      assertThat(f.effectRows()).isEqualTo(count);
      assertThat(second.unsettled()).isZero();
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
    }
  }

  @Test
  void neverMoreUnackedDeliveriesThanThePrefetch() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_prefetch", RabbitTopology.QueueType.CLASSIC)) {
      int count = 300;
      int prefetch = 5;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        messages.add(RabbitService.message("p-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);
      AtomicInteger inHandler = new AtomicInteger();
      AtomicInteger maxInHandler = new AtomicInteger();
      RabbitSource<String> source = f.source(f.options().prefetch(prefetch).build());
      // Concurrency above the prefetch on purpose: the broker's qos must be the binding limit.
      f.run(source, f
          .consumer(
              (payload, tx) -> Mono.fromRunnable(() -> maxInHandler.accumulateAndGet(inHandler.incrementAndGet(), Math::max))
                  .then(Mono.delay(Duration.ofMillis(5)))
                  .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)")
                      .bind(0, tx.messageId()).bind(1, payload).execute())
                  .doFinally(s -> inHandler.decrementAndGet()))
          .concurrency(16).ordering(Ordering.UNORDERED).build());

      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.PROCESSED) == count);
      assertThat(source.peakUnsettled()).as("most unacked deliveries on the channel").isEqualTo(prefetch);
      assertThat(maxInHandler.get()).isLessThanOrEqualTo(prefetch).isGreaterThan(1);
      assertThat(f.effectRows()).isEqualTo(count);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
    }
  }

  /** A delivery whose ack is lost, as if the process died right after the commit. */
  private static final class LostAck extends AbstractDelivery<String> {
    private final Delivery<String> delegate;

    LostAck(Delivery<String> delegate) {
      this.delegate = delegate;
    }

    @Override
    public String id() {
      return delegate.id();
    }

    @Override
    public String payload() {
      return delegate.payload();
    }

    @Override
    public Map<String, String> headers() {
      return delegate.headers();
    }

    @Override
    public Instant timestamp() {
      return delegate.timestamp();
    }

    @Override
    public int deliveryAttempt() {
      return delegate.deliveryAttempt();
    }

    @Override
    protected Mono<Void> doAck() {
      return Mono.error(new IllegalStateException("simulated crash between commit and ack"));
    }

    @Override
    protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
      return Mono.error(new IllegalStateException("simulated crash"));
    }
  }
}
