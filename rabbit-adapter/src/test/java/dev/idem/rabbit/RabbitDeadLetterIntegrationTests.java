package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.GetResponse;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.rabbit.internal.HeaderValues;
import dev.idem.rabbit.testing.RabbitService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** Dead letters and replay against the real RabbitMQ and PostgreSQL. */
class RabbitDeadLetterIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @Test
  void missingIdUndecodableBodyAndAlwaysFailingHandlerEndInTheDeadLetterQueueWithTheirReasons() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_dlq", RabbitTopology.QueueType.CLASSIC)) {
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        messages.add(RabbitService.message("ok-" + i, Integer.toString(100 + i)));
      }
      messages.add(RabbitService.message(null, "7"));
      messages.add(RabbitService.message("bad-body", "not a number"));
      messages.add(RabbitService.message("always-fails", "13"));
      f.rabbit.publish(f.queue, messages);

      RabbitSource<Integer> source = f.source(f.options().prefetch(16).build(),
          (body, props) -> Integer.parseInt(new String(body, java.nio.charset.StandardCharsets.UTF_8)));
      IdempotentConsumer<Integer> pipeline = IdempotentConsumer.<Integer>named(f.consumer)
          .inbox(f.inbox)
          .retry(RetryPolicy.backoff(3, Duration.ofMillis(10)))
          .handler((value, tx) -> value == 13
              ? Mono.error(new IllegalStateException("boom for " + value))
              : tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId())
                  .bind(1, value.toString()).execute())
          .build();
      f.runMapped(source, pipeline, Outcome::status);

      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 3 && f.outcomes(Outcome.Status.PROCESSED) == 20);
      assertThat(f.effectRows()).isEqualTo(20);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();

      Map<String, GetResponse> byReason = f.rabbit.drain(f.deadLetterQueue).stream()
          .collect(Collectors.toMap(r -> header(r, RabbitHeaders.REASON), Function.identity()));
      assertThat(byReason).containsOnlyKeys("MISSING_ID", "UNDECODABLE_PAYLOAD", "RETRIES_EXHAUSTED");

      GetResponse missing = byReason.get("MISSING_ID");
      assertThat(missing.getProps().getMessageId()).isNull();
      assertThat(new String(missing.getBody(), java.nio.charset.StandardCharsets.UTF_8)).isEqualTo("7");
      assertThat(header(missing, RabbitHeaders.CONSUMER)).isEqualTo(f.consumer);

      GetResponse undecodable = byReason.get("UNDECODABLE_PAYLOAD");
      assertThat(undecodable.getProps().getMessageId()).isEqualTo("bad-body");
      assertThat(header(undecodable, RabbitHeaders.ERROR_CLASS)).isEqualTo(NumberFormatException.class.getName());

      GetResponse failing = byReason.get("RETRIES_EXHAUSTED");
      assertThat(failing.getProps().getMessageId()).isEqualTo("always-fails");
      assertThat(header(failing, RabbitHeaders.ERROR_CLASS)).isEqualTo(IllegalStateException.class.getName());
      assertThat(header(failing, RabbitHeaders.ERROR_MESSAGE)).isEqualTo("boom for 13");
      assertThat(header(failing, RabbitHeaders.ATTEMPTS)).isEqualTo("3");
      assertThat(header(failing, RabbitHeaders.CONSUMER)).isEqualTo(f.consumer);
      assertThat(header(failing, RabbitHeaders.ORIGINAL_EXCHANGE)).isEmpty();
      assertThat(header(failing, RabbitHeaders.ORIGINAL_ROUTING_KEY)).isEqualTo(f.queue);
      assertThat(header(failing, RabbitHeaders.ORIGINAL_QUEUE)).isEqualTo(f.queue);
    }
  }

  @Test
  void replayFromTheDeadLetterQueueHasOneEffectAndReplayingTwiceStillOne() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_replay", RabbitTopology.QueueType.CLASSIC)) {
      AtomicBoolean broken = new AtomicBoolean(true);
      // The same message published twice while the dependency is broken: two dead letters, one id.
      f.rabbit.publish(f.queue, List.of(RabbitService.message("r-1", "payload"), RabbitService.message("r-1", "payload"),
          RabbitService.message("other", "payload")));
      RabbitSource<String> source = f.source(f.options().build());
      f.run(source, f.consumer((payload, tx) -> broken.get() && "r-1".equals(tx.messageId())
          ? Mono.error(new NonRetryableException("downstream rejected r-1"))
          : f.recordingHandler().handle(payload, tx)).build());
      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 2 && f.outcomes(Outcome.Status.PROCESSED) == 1);
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).isEqualTo(2);

      broken.set(false);
      try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create(f.rabbit.uri())) {
        long replayed = replayer.replay(f.deadLetterQueue, m -> "r-1".equals(m.messageId())).block(PATIENCE);
        assertThat(replayed).isEqualTo(2);
        await().atMost(PATIENCE)
            .until(() -> f.outcomes(Outcome.Status.PROCESSED) == 2 && f.outcomes(Outcome.Status.DUPLICATE) == 1);
        assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + " WHERE message_id = 'r-1'")).isEqualTo(1);

        assertThat(replayer.replayAll(f.deadLetterQueue).block(PATIENCE)).as("nothing left to replay").isZero();
      }
      assertThat(f.effectRows()).isEqualTo(2);
      assertThat(f.settled).filteredOn(o -> "r-1".equals(o.messageId()) && o.status() != Outcome.Status.DEAD_LETTERED)
          .allSatisfy(o -> assertThat(o.delivery().headers()).containsEntry(RabbitHeaders.REPLAY_COUNT, "1"));
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).isZero();
    }
  }

  @Test
  void rejectModeLetsTheQueueDeadLetterExchangeMoveTheMessageAndReplayFindsItsOrigin() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_reject", RabbitTopology.QueueType.QUORUM)) {
      AtomicBoolean broken = new AtomicBoolean(true);
      f.rabbit.publish(f.queue, List.of(RabbitService.message("x-1", "payload"), RabbitService.message("x-2", "payload")));
      RabbitSource<String> source = f.source(f.options().deadLetterMode(DeadLetterMode.REJECT_TO_QUEUE_DLX).build());
      f.run(source, f.consumer((payload, tx) -> broken.get() && "x-1".equals(tx.messageId())
          ? Mono.error(new NonRetryableException("no"))
          : f.recordingHandler().handle(payload, tx)).build());
      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 1 && f.outcomes(Outcome.Status.PROCESSED) == 1);
      await().atMost(PATIENCE).until(() -> f.rabbit.messageCount(f.deadLetterQueue) == 1);

      broken.set(false);
      try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create(f.rabbit.uri())) {
        assertThat(replayer.replayAll(f.deadLetterQueue).block(PATIENCE)).isEqualTo(1);
      }
      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.PROCESSED) == 2);
      assertThat(f.effectRows()).isEqualTo(2);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).isZero();
    }
  }

  private static String header(GetResponse response, String name) {
    Map<String, Object> headers = response.getProps().getHeaders();
    return headers == null ? null : HeaderValues.render(headers.get(name));
  }
}
