package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.TcpProxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** Loss of the connection or the consumer, against the real RabbitMQ and PostgreSQL. */
class RabbitRecoveryIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @Test
  void connectionClosedByTheBrokerMidStreamIsRecoveredAndEveryMessageHasOneEffect() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_recover", RabbitTopology.QueueType.CLASSIC)) {
      assertThat(f.rabbit.canCloseConnectionsFromBroker())
          .as("this test closes its own connection with rabbitmqctl on the local broker").isTrue();
      int count = 400;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        messages.add(RabbitService.message("k-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);
      RabbitSourceOptions options = f.options().prefetch(20).build();
      RabbitSource<String> source = f.source(options);
      // After 40 messages the handlers wait for the gate inside their open transactions, so the
      // connection is closed while 8 messages are mid-flight: they commit after it is gone and
      // their acks are dropped.
      AtomicInteger started = new AtomicInteger();
      Sinks.Empty<Void> gate = Sinks.empty();
      f.run(source, f.consumer((payload, tx) -> (started.incrementAndGet() > 40 ? gate.asMono() : Mono.<Void>empty())
              .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, payload).execute()))
          .concurrency(8).ordering(Ordering.UNORDERED).build());

      await().atMost(PATIENCE).until(() -> f.effectRows() >= 40 && started.get() >= 48);
      assertThat(f.rabbit.closeConnectionFromBroker(options.connectionName())).isEqualTo(1);
      gate.tryEmitEmpty();

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500)).until(() -> f.effectRows() == count && f.rabbit.messageCount(f.queue) == 0
          && source.unsettled() == 0);
      assertThat(source.sessions()).as("consumer sessions").isGreaterThanOrEqualTo(2);
      assertThat(f.distinctEffects()).isEqualTo(count);
      assertThat(f.outcomes(Outcome.Status.DUPLICATE)).as("committed before the close, acked after redelivery").isGreaterThanOrEqualTo(1);
      System.out.printf("broker-closed connection: %d processed, %d redelivered duplicates, %d sessions%n",
          f.outcomes(Outcome.Status.PROCESSED), f.outcomes(Outcome.Status.DUPLICATE), source.sessions());
      assertThat(f.outcomes(Outcome.Status.DEAD_LETTERED)).isZero();
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.effectRows()).isEqualTo(count);
    }
  }

  @Test
  void networkCutAndRestoredIsRecoveredAndEveryMessageHasOneEffect() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_cut", RabbitTopology.QueueType.CLASSIC);
        TcpProxy proxy = new TcpProxy(f.rabbit.host(), f.rabbit.port())) {
      int count = 300;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        messages.add(RabbitService.message("n-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);
      RabbitSource<String> source = f.source(f.options().uri(f.rabbit.uriVia("127.0.0.1", proxy.port())).prefetch(20).build());
      f.run(source, f.consumer((payload, tx) -> Mono.delay(Duration.ofMillis(3))
              .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId()).bind(1, payload).execute()))
          .concurrency(8).ordering(Ordering.UNORDERED).build());

      await().atMost(PATIENCE).until(() -> f.effectRows() >= 30);
      proxy.cut();
      // While cut, reconnection attempts are refused; the source backs off instead of failing.
      await().atMost(PATIENCE).until(() -> f.rabbit.consumerCount(f.queue) == 0);
      proxy.restore();

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500)).until(() -> f.effectRows() == count && f.rabbit.messageCount(f.queue) == 0
          && source.unsettled() == 0);
      assertThat(source.sessions()).isGreaterThanOrEqualTo(2);
      assertThat(f.distinctEffects()).isEqualTo(count);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.effectRows()).isEqualTo(count);
    }
  }

  @Test
  void queueDeletedAndRecreatedEndsInAResubscribedConsumer() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_requeue", RabbitTopology.QueueType.CLASSIC)) {
      f.rabbit.publish(f.queue, List.of(RabbitService.message("a-1", "one")));
      RabbitSource<String> source = f.source(f.options().build());
      f.run(source, f.consumer(f.recordingHandler()).build());
      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.PROCESSED) == 1);

      try (var channel = f.rabbit.admin().createChannel()) {
        channel.queueDelete(f.queue);
      }
      RabbitTopology.declare(f.rabbit.admin(), f.queue, RabbitTopology.QueueType.CLASSIC);
      await().atMost(PATIENCE).until(() -> f.rabbit.consumerCount(f.queue) == 1);
      f.rabbit.publish(f.queue, List.of(RabbitService.message("a-2", "two")));

      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.PROCESSED) == 2);
      assertThat(source.sessions()).isGreaterThanOrEqualTo(2);
      assertThat(f.effectRows()).isEqualTo(2);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
    }
  }
}
