package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.rabbit.internal.RabbitReceiver;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.TcpProxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
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
          .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId())
              .bind(1, payload).execute()))
          // One transaction per message, so that exactly 8 are mid-flight (batched, the held ones
          // would be detached after 2 s and wait off their lanes, each holding a connection).
          .maxBatchSize(1).concurrency(8).ordering(Ordering.UNORDERED).build());

      await().atMost(PATIENCE).until(() -> f.effectRows() >= 40 && started.get() >= 48);
      assertThat(f.rabbit.closeConnectionFromBroker(options.connectionName())).isEqualTo(1);
      gate.tryEmitEmpty();

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500))
          .until(() -> f.effectRows() == count && f.rabbit.messageCount(f.queue) == 0
              && source.unsettled() == 0);
      assertThat(source.sessions()).as("consumer sessions").isGreaterThanOrEqualTo(2);
      assertThat(f.distinctEffects()).isEqualTo(count);
      assertThat(f.outcomes(Outcome.Status.DUPLICATE)).as("committed before the close, acked after redelivery")
          .isGreaterThanOrEqualTo(1);
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
          .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId())
              .bind(1, payload).execute()))
          .concurrency(8).ordering(Ordering.UNORDERED).build());

      await().atMost(PATIENCE).until(() -> f.effectRows() >= 30);
      proxy.cut();
      // While cut, reconnection attempts are refused; the source backs off instead of failing.
      await().atMost(PATIENCE).until(() -> f.rabbit.consumerCount(f.queue) == 0);
      proxy.restore();

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500))
          .until(() -> f.effectRows() == count && f.rabbit.messageCount(f.queue) == 0
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

  /**
   * RabbitMQ 3.10 reads {@code consumer_timeout} once, when a channel opens, and checks the oldest
   * unacknowledged delivery of a channel on its tick ({@code channel_tick_interval}, 60 s by
   * default, read each time the tick is re-armed). So both are lowered before the source opens
   * its channel: the channel then closes with PRECONDITION_FAILED about 3 to 4 s after the first
   * delivery, which the handler holds (its transaction open) until the source has resubscribed.
   */
  @Test
  void consumerTimeoutClosingTheChannelEndsInAResubscribedConsumerAndEveryMessageHasOneEffect() throws Exception {
    ListAppender<ILoggingEvent> losses = new ListAppender<>();
    Logger receiverLog = (Logger) LoggerFactory.getLogger(RabbitReceiver.class);
    losses.start();
    receiverLog.addAppender(losses);
    try (RabbitFixture f = new RabbitFixture("rq_ctimeout", RabbitTopology.QueueType.CLASSIC)) {
      assertThat(f.rabbit.canChangeBrokerSettings())
          .as("this test lowers consumer_timeout with rabbitmqctl eval on the local broker").isTrue();
      int count = 60;
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        messages.add(RabbitService.message("t-" + i, "body-" + i));
      }
      f.rabbit.publish(f.queue, messages);

      RabbitSource<String> source;
      AtomicReference<String> held = new AtomicReference<>();
      Sinks.Empty<Void> gate = Sinks.empty();
      // Closed (restored) before the fixture: the overrides are node-wide and only channels opened
      // while they are in force use them.
      try (RabbitService.BrokerSettingOverride tick = f.rabbit.overrideBrokerSetting("channel_tick_interval", "1000");
          RabbitService.BrokerSettingOverride timeout = f.rabbit.overrideBrokerSetting("consumer_timeout", "3000")) {
        System.out.printf("broker settings before the test (restored after it): consumer_timeout=%s, channel_tick_interval=%s%n",
            timeout.previous(), tick.previous());
        source = f.source(f.options().prefetch(10).build());
        // The first delivery's handler waits for the gate inside its open transaction; the others
        // go through and are acknowledged in time.
        f.run(source, f.consumer((payload, tx) -> (held.compareAndSet(null, tx.messageId()) ? gate.asMono() : Mono.<Void>empty())
            .then(tx.sql("INSERT INTO " + f.effects + " (message_id, body) VALUES ($1, $2)").bind(0, tx.messageId())
                .bind(1, payload).execute()))
            // One transaction per message: the held delivery's transaction alone stays open past the
            // consumer_timeout (in a batch it would hold back its batch, or be detached after 2 s).
            .maxBatchSize(1).concurrency(8).ordering(Ordering.UNORDERED).build());

        await().atMost(PATIENCE).until(() -> held.get() != null && f.effectRows() == count - 1);
        // The broker closes the channel for the held delivery; the source opens a new one.
        await("consumer_timeout of 3 s enforced within 90 s").atMost(Duration.ofSeconds(90)).until(() -> source.sessions() >= 2);
        assertThat(losses.list).extracting(ILoggingEvent::getFormattedMessage)
            .anySatisfy(m -> assertThat(m).contains("PRECONDITION_FAILED - delivery acknowledgement")
                .contains("Timeout value used: 3000 ms"));
        assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + " WHERE message_id = $1", held.get()))
            .as("the held delivery has not committed yet").isZero();
        // Released before the settings are restored (which takes seconds), so the redelivery on
        // the new channel, which also runs with the 3 s timeout, is settled in time.
        gate.tryEmitEmpty();
      } finally {
        gate.tryEmitEmpty();
      }

      await().atMost(PATIENCE).pollInterval(Duration.ofMillis(500))
          .until(() -> f.effectRows() == count && f.rabbit.messageCount(f.queue) == 0
              && source.unsettled() == 0 && f.settled.stream().anyMatch(o -> o.messageId().equals(held.get())));
      assertThat(source.sessions()).as("consumer sessions").isGreaterThanOrEqualTo(2);
      assertThat(f.distinctEffects()).isEqualTo(count);
      List<Outcome<String>> heldOutcomes = f.settled.stream().filter(o -> o.messageId().equals(held.get())).toList();
      assertThat(heldOutcomes).as("outcomes of the timed-out delivery " + held.get())
          .singleElement()
          .satisfies(o -> assertThat(o.status()).as("committed by the held transaction after the timeout")
              .isEqualTo(Outcome.Status.DUPLICATE))
          .satisfies(o -> assertThat(o.delivery().deliveryAttempt()).as("redelivered").isGreaterThanOrEqualTo(2));
      System.out.printf("consumer_timeout: held %s settled as %s, %d processed, %d duplicates, %d sessions%n", held.get(),
          heldOutcomes.stream().map(o -> o.status() + "@attempt" + o.delivery().deliveryAttempt()).toList(),
          f.outcomes(Outcome.Status.PROCESSED), f.outcomes(Outcome.Status.DUPLICATE), source.sessions());
      assertThat(f.outcomes(Outcome.Status.DEAD_LETTERED)).isZero();
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).as("nothing was left unacknowledged").isZero();
      assertThat(f.effectRows()).isEqualTo(count);
    } finally {
      receiverLog.detachAppender(losses);
    }
  }
}
