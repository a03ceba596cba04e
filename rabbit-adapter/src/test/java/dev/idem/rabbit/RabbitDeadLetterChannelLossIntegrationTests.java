package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.Consumer;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.NoOpMetricsCollector;
import com.rabbitmq.client.observation.ObservationCollector;
import dev.idem.DeadLetter;
import dev.idem.DeadLetterReason;
import dev.idem.Delivery;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.rabbit.internal.HeaderValues;
import dev.idem.rabbit.internal.RabbitReceiver;
import dev.idem.rabbit.internal.SettlementException;
import dev.idem.rabbit.testing.RabbitService;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/**
 * The channel of a delivery is lost between its confirmed dead-letter publish and its ack, on the
 * real RabbitMQ and PostgreSQL.
 *
 * <p>The source's own connection factory gets client hooks (through the public
 * {@code connectionFactoryCustomizer}) that, when the first dead letter is about to be published,
 * close the consuming channel: the publish then goes through and is confirmed, and the ack finds
 * its channel gone. The same hooks hold the source's next consumer channel until the test has
 * looked at the lost one, so what happens before the redelivery is observed in a fixed order.
 */
class RabbitDeadLetterChannelLossIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @Test
  void channelLostBetweenTheConfirmedPublishAndTheAckGivesOneExtraDeadLetterCopyNeverAStream() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_dlloss", RabbitTopology.QueueType.CLASSIC)) {
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        messages.add(RabbitService.message("ok-" + i, "body-" + i));
      }
      messages.add(3, RabbitService.message("poison", "rejected by the handler"));
      f.rabbit.publish(f.queue, messages);

      ChannelLossHook hook = new ChannelLossHook(RabbitTopology.deadLetterExchange(f.queue));
      try {
        RabbitSource<String> source = f.source(f.options().connectionFactoryCustomizer(hook::install).build());
        List<Observed> poisonDeliveries = new CopyOnWriteArrayList<>();
        AtomicInteger lowestUnsettled = new AtomicInteger();
        f.run(source.receive().<Delivery<String>>map(d -> {
          Observed observed = new Observed(d, () -> lowestUnsettled.accumulateAndGet(source.unsettled(), Math::min));
          if ("poison".equals(d.id())) {
            poisonDeliveries.add(observed);
          }
          return observed;
        }), f.consumer((payload, tx) -> "poison".equals(tx.messageId())
            ? Mono.error(new NonRetryableException("the handler rejects this message"))
            : f.recordingHandler().handle(payload, tx)).build());

        // The first delivery's dead letter was confirmed, then its ack found the channel closed.
        await().atMost(PATIENCE).until(() -> !poisonDeliveries.isEmpty() && poisonDeliveries.get(0).failures.size() >= 1);
        Observed first = poisonDeliveries.get(0);
        assertThat(first.failures.get(0))
            .isInstanceOf(SettlementException.class)
            .hasMessageContaining("ack after the confirmed dead-letter publish of message 'poison' failed")
            .hasMessageContaining("the broker will redeliver the message");
        assertThat(f.rabbit.messageCount(f.deadLetterQueue)).as("the confirmed dead letter of the lost delivery").isEqualTo(1);

        // Settling that delivery again, as a retrying caller would, publishes no further copy and
        // releases nothing twice. The lost channel's session is still the current one (the new
        // consumer waits for the hook), so the gauge reads its count.
        DeadLetter again = DeadLetter.rejected(DeadLetterReason.NON_RETRYABLE_ERROR, "settled again by the test", f.consumer);
        int retries = 8;
        for (int i = 0; i < retries; i++) {
          assertThatThrownBy(() -> first.delegate.deadLetter(again).block(PATIENCE))
              .isInstanceOf(SettlementException.class)
              .hasMessageContaining("the broker will redeliver the message");
        }
        assertThat(source.unsettled())
            .as("unsettled deliveries of the lost channel after " + retries + " more settlement attempts")
            .isZero();
        assertThat(f.rabbit.messageCount(f.deadLetterQueue)).as("dead letters after " + retries + " more settlement attempts")
            .isEqualTo(1);

        hook.allowNextConsumer.countDown();
        await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 1 && f.distinctEffects() == 6
            && f.rabbit.messageCount(f.queue) == 0 && source.unsettled() == 0);
        assertThat(source.sessions()).isEqualTo(2);
        assertThat(poisonDeliveries).hasSize(2);
        assertThat(poisonDeliveries.get(1).delegate.deliveryAttempt()).as("the redelivery").isEqualTo(2);
        assertThat(poisonDeliveries.get(1).failures).isEmpty();
        f.stopConsumers();

        List<GetResponse> deadLetters = f.rabbit.drain(f.deadLetterQueue);
        assertThat(deadLetters).as("one copy per delivery of the poison message").hasSize(2)
            .allSatisfy(r -> {
              assertThat(r.getProps().getMessageId()).isEqualTo("poison");
              assertThat(header(r, RabbitHeaders.REASON)).isEqualTo("NON_RETRYABLE_ERROR");
            });
        assertThat(deadLetters).extracting(r -> header(r, RabbitHeaders.DELIVERY_ATTEMPT)).containsExactlyInAnyOrder("1", "2");
        assertThat(f.rabbit.messageCount(f.queue)).isZero();
        assertThat(f.effectRows()).isEqualTo(6);
        assertThat(lowestUnsettled.get()).as("lowest unsettled count seen after any settlement").isGreaterThanOrEqualTo(0);
      } finally {
        hook.allowNextConsumer.countDown();
      }
    }
  }

  private static String header(GetResponse response, String name) {
    Map<String, Object> headers = response.getProps().getHeaders();
    return headers == null ? null : HeaderValues.render(headers.get(name));
  }

  /**
   * Closes the consuming channel just before the first publish to the dead-letter exchange
   * ({@link ObservationCollector#publish} runs on the publishing thread, before the frame is
   * sent), and holds the source's every channel creation after the first until
   * {@link #allowNextConsumer} opens ({@link com.rabbitmq.client.MetricsCollector#newChannel} runs
   * on the creating thread, outside the client's locks; blocking in a consumer-registration hook
   * instead would block the connection's I/O thread).
   */
  private static final class ChannelLossHook extends NoOpMetricsCollector implements ObservationCollector {
    final CountDownLatch allowNextConsumer = new CountDownLatch(1);
    private final String deadLetterExchange;
    private final AtomicReference<Channel> consuming = new AtomicReference<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AtomicInteger consumerChannels = new AtomicInteger();

    ChannelLossHook(String deadLetterExchange) {
      this.deadLetterExchange = deadLetterExchange;
    }

    void install(ConnectionFactory factory) {
      factory.setMetricsCollector(this);
      factory.setObservationCollector(this);
    }

    @Override
    public void newChannel(Channel channel) {
      boolean forConsumer = StackWalker.getInstance()
          .walk(frames -> frames.anyMatch(frame -> frame.getClassName().startsWith(RabbitReceiver.class.getName())));
      if (!forConsumer) {
        return;
      }
      if (consumerChannels.incrementAndGet() == 1) {
        consuming.set(channel);
        return;
      }
      try {
        if (!allowNextConsumer.await(PATIENCE.toSeconds(), TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never allowed the next consumer");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }

    // The hook's signature changed within amqp-client 5.x (a byte[] body in 5.27, a ByteBuffer
    // in 5.37), so both are implemented, without @Override: the suite runs on either client.

    /** The publish hook of amqp-client 5.37. */
    public void publish(PublishCall call, AMQP.Basic.Publish publish, AMQP.BasicProperties properties, ByteBuffer body,
        ConnectionInfo connectionInfo) throws IOException {
      beforePublish(call, publish, properties);
    }

    /** The publish hook of amqp-client 5.27. */
    public void publish(PublishCall call, AMQP.Basic.Publish publish, AMQP.BasicProperties properties, byte[] body,
        ConnectionInfo connectionInfo) throws IOException {
      beforePublish(call, publish, properties);
    }

    private void beforePublish(PublishCall call, AMQP.Basic.Publish publish, AMQP.BasicProperties properties) throws IOException {
      if (deadLetterExchange.equals(publish.getExchange()) && closed.compareAndSet(false, true)) {
        try {
          consuming.get().close();
        } catch (TimeoutException e) {
          throw new IOException(e);
        }
      }
      call.publish(properties);
    }

    @Override
    public Consumer basicConsume(String queue, String consumerTag, Consumer consumer) {
      return consumer;
    }

    @Override
    public GetResponse basicGet(BasicGetCall call, String queue) {
      return call.get();
    }
  }

  /** A delivery that records the failures of its dead-letter settlements. */
  private static final class Observed implements Delivery<String> {
    final Delivery<String> delegate;
    final List<Throwable> failures = new CopyOnWriteArrayList<>();
    private final Runnable afterSettlement;

    Observed(Delivery<String> delegate, Runnable afterSettlement) {
      this.delegate = delegate;
      this.afterSettlement = afterSettlement;
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
    public Throwable decodingFailure() {
      return delegate.decodingFailure();
    }

    @Override
    public Map<String, String> headers() {
      return delegate.headers();
    }

    @Override
    public String orderingKey() {
      return delegate.orderingKey();
    }

    @Override
    public String partition() {
      return delegate.partition();
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
    public Mono<Void> ack() {
      return delegate.ack().doFinally(signal -> afterSettlement.run());
    }

    @Override
    public Mono<Void> deadLetter(DeadLetter deadLetter) {
      return delegate.deadLetter(deadLetter).doOnError(failures::add).doFinally(signal -> afterSettlement.run());
    }
  }
}
