package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.Handler;
import dev.idem.Outcome;
import dev.idem.rabbit.testing.RabbitService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * A handler that throws a JVM error ({@link OutOfMemoryError}) on the real broker: the stream
 * terminates with the error, the message goes back to the queue unacknowledged (not to the dead
 * letter queue), and a restarted consumer applies every message once.
 */
class RabbitHandlerJvmErrorIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @Test
  void aHandlerOutOfMemoryErrorStopsTheStreamReturnsTheMessageToTheQueueAndARestartAppliesEverythingOnce() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_jvm_error", RabbitTopology.QueueType.QUORUM)) {
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        messages.add(RabbitService.message("m-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);
      Handler<String> recording = f.recordingHandler();
      AtomicBoolean thrown = new AtomicBoolean();
      Handler<String> oomOnce = (payload, tx) -> {
        if (payload.equals("body-4") && thrown.compareAndSet(false, true)) {
          throw new OutOfMemoryError("test: Java heap space in the handler");
        }
        return recording.handle(payload, tx);
      };

      AtomicReference<Throwable> terminated = new AtomicReference<>();
      RabbitSource<String> first = f.source(f.options().prefetch(4).build());
      Disposable running = f.consumer(oomOnce).concurrency(1).build().process(first.receive())
          .subscribe(o -> {}, terminated::set);
      await().atMost(PATIENCE).until(() -> terminated.get() != null);
      running.dispose();
      f.stopConsumers();

      assertThat(terminated.get()).isInstanceOf(OutOfMemoryError.class);
      assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + " WHERE message_id = 'm-4'")).isZero();
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).as("a JVM error is not the message's fault").isZero();
      await().atMost(PATIENCE).until(() -> f.rabbit.messageCount(f.queue) >= 1);

      f.run(f.source(f.options().build()), f.consumer(recording).build());
      await().atMost(PATIENCE).until(() -> f.distinctEffects() == 10 && f.rabbit.messageCount(f.queue) == 0);
      f.stopConsumers();
      assertThat(f.effectRows()).isEqualTo(10);
      assertThat(f.rabbit.messageCount(f.deadLetterQueue)).isZero();
      assertThat(f.outcomes(Outcome.Status.DEAD_LETTERED)).isZero();
    }
  }
}
