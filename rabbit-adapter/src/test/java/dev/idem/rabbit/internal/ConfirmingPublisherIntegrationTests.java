package dev.idem.rabbit.internal;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.Consumer;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.observation.ObservationCollector;
import dev.idem.internal.JvmErrors;
import dev.idem.rabbit.RabbitHeaders;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.internal.ConfirmingPublisher.ChannelOpener;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** {@link ConfirmingPublisher} against the real broker: confirms, returns, channel loss, failing client hooks, close. */
class ConfirmingPublisherIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final RabbitService rabbit = RabbitService.get();
  private final List<AutoCloseable> closeables = new ArrayList<>();
  private String queue;

  @BeforeEach
  void setUp() throws Exception {
    queue = PostgresService.uniqueName("confirming");
    try (Channel channel = rabbit.admin().createChannel()) {
      channel.queueDeclare(queue, true, false, false, null);
    }
  }

  @AfterEach
  void tearDown() throws Exception {
    for (int i = closeables.size() - 1; i >= 0; i--) {
      closeables.get(i).close();
    }
    try (Channel channel = rabbit.admin().createChannel()) {
      channel.queueDelete(queue);
    }
  }

  private ConfirmingPublisher publisher(java.util.function.Consumer<ConnectionFactory> customizer) {
    ConnectionFactory factory = RabbitSourceOptions.builder(queue).uri(rabbit.uri()).connectionFactoryCustomizer(customizer)
        .build()
        .newConnectionFactory();
    ConnectionHolder connection = new ConnectionHolder(factory, PostgresService.uniqueName("publisher"));
    ChannelOpener opener = () -> connection.get().createChannel();
    ConfirmingPublisher publisher = new ConfirmingPublisher(PostgresService.uniqueName("test"), opener);
    closeables.add(connection);
    closeables.add(publisher);
    return publisher;
  }

  private ConfirmingPublisher publisher() {
    return publisher(factory -> {});
  }

  private static AMQP.BasicProperties props(String id) {
    return new AMQP.BasicProperties.Builder().messageId(id).deliveryMode(2).headers(Map.of("kind", "test")).build();
  }

  private static byte[] body(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** The error of a publish, or {@code null} when the broker confirmed it. */
  private static Throwable outcome(Mono<Void> publish) {
    return publish.then(Mono.<Throwable>empty()).onErrorResume(Mono::just).block(TIMEOUT);
  }

  @Test
  void publishesFromManyThreadsAtOnceAreAllConfirmedAndEachArrivesOnceWithItsOwnSequenceHeader() {
    ConfirmingPublisher publisher = publisher();
    int n = 2_000;

    List<String> confirmed = Flux.range(0, n).parallel(8).runOn(Schedulers.parallel())
        .flatMap(i -> publisher.publish("", queue, props("m-" + i), body("body " + i)).thenReturn("m-" + i))
        .sequential().collectList().block(TIMEOUT);

    assertThat(confirmed).hasSize(n);
    List<GetResponse> messages = rabbit.drain(queue);
    assertThat(messages).extracting(m -> m.getProps().getMessageId())
        .containsExactlyInAnyOrderElementsOf(IntStream.range(0, n).mapToObj(i -> "m-" + i).toList());
    assertThat(messages).allSatisfy(m -> {
      assertThat(m.getProps().getDeliveryMode()).isEqualTo(2);
      assertThat(m.getProps().getHeaders().get("kind").toString()).isEqualTo("test");
    });
    Set<Object> sequences = messages.stream().map(m -> m.getProps().getHeaders().get(RabbitHeaders.PUBLISH_SEQUENCE))
        .collect(Collectors.toSet());
    assertThat(sequences).as("one publish sequence number per message").hasSize(n);
  }

  @Test
  void unroutableMessagesPipelinedAmongRoutableOnesFailAndOnlyThey() {
    ConfirmingPublisher publisher = publisher();
    String nowhere = PostgresService.uniqueName("no_such_queue");
    Map<String, Throwable> failures = new ConcurrentHashMap<>();

    List<String> sent = Flux.range(0, 600)
        .flatMap(i -> {
          String id = "m-" + i;
          String routingKey = i % 3 == 0 ? nowhere : queue;
          return publisher.publish("", routingKey, props(id), body(id)).thenReturn(id)
              .onErrorResume(e -> {
                failures.put(id, e);
                return Mono.empty();
              });
        }, 600)
        .collectList().block(TIMEOUT);

    assertThat(failures.keySet()).containsExactlyInAnyOrderElementsOf(
        IntStream.range(0, 600).filter(i -> i % 3 == 0).mapToObj(i -> "m-" + i).toList());
    assertThat(failures.values()).allSatisfy(e -> assertThat(e).isInstanceOf(IOException.class)
        .hasMessageContaining("unroutable")
        .hasMessageContaining("no queue is bound to exchange '' with routing key '" + nowhere + "'"));
    assertThat(rabbit.drain(queue)).extracting(m -> m.getProps().getMessageId()).containsExactlyInAnyOrderElementsOf(sent);
    assertThat(sent).hasSize(400);
  }

  @Test
  void aChannelTheBrokerClosesFailsItsUnconfirmedPublishWithTheReasonAndTheNextPublishOpensANewChannel() {
    ConfirmingPublisher publisher = publisher();
    String missingExchange = PostgresService.uniqueName("no_such_exchange");

    Throwable lost = outcome(publisher.publish(missingExchange, queue, props("lost"), body("lost")));

    assertThat(lost).isInstanceOf(IOException.class)
        .hasMessageContaining("closed before the broker confirmed the message published to exchange '" + missingExchange + "'")
        .hasMessageContaining("may or may not have been routed")
        .hasMessageContaining("NOT_FOUND");
    assertThat(outcome(publisher.publish("", queue, props("after"), body("after")))).isNull();
    assertThat(rabbit.drain(queue)).extracting(m -> m.getProps().getMessageId()).containsExactly("after");
  }

  @Test
  void aClientHookThatThrowsFailsThatPublishOnlyAndAJvmErrorTravelsAsSignalled() {
    ConfirmingPublisher publisher = publisher(factory -> factory.setObservationCollector(new ThrowingHook()));

    assertThat(outcome(publisher.publish("", queue, props("first"), body("x")))).isNull();
    Throwable assertion = outcome(publisher.publish("", queue, props("assert"), body("x")));
    assertThat(outcome(publisher.publish("", queue, props("second"), body("x")))).isNull();
    Throwable overflow = outcome(publisher.publish("", queue, props("overflow"), body("x")));
    assertThat(outcome(publisher.publish("", queue, props("third"), body("x")))).isNull();

    assertThat(assertion).isInstanceOf(IOException.class)
        .hasMessageContaining("may or may not have reached the broker")
        .hasRootCauseInstanceOf(AssertionError.class);
    assertThat(overflow).isInstanceOf(JvmErrors.Signalled.class).hasCauseInstanceOf(StackOverflowError.class);
    assertThat(rabbit.drain(queue)).extracting(m -> m.getProps().getMessageId()).containsExactly("first", "second", "third");
  }

  @Test
  void afterCloseEveryPublishFailsSayingSo() {
    ConfirmingPublisher publisher = publisher();
    assertThat(outcome(publisher.publish("", queue, props("before"), body("x")))).isNull();

    publisher.close();

    assertThat(outcome(publisher.publish("", queue, props("after"), body("x"))))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
    assertThat(rabbit.drain(queue)).extracting(m -> m.getProps().getMessageId()).containsExactly("before");
  }

  /** Throws from the client's publish hook for the message ids "assert" and "overflow". */
  private static final class ThrowingHook implements ObservationCollector {
    // Both signatures of the hook (byte[] body in amqp-client 5.27, ByteBuffer in 5.37), without
    // @Override, so that the test runs on either client.

    /** The publish hook of amqp-client 5.37. */
    public void publish(PublishCall call, AMQP.Basic.Publish publish, AMQP.BasicProperties properties, ByteBuffer body,
        ConnectionInfo connectionInfo) throws IOException {
      beforePublish(call, properties);
    }

    /** The publish hook of amqp-client 5.27. */
    public void publish(PublishCall call, AMQP.Basic.Publish publish, AMQP.BasicProperties properties, byte[] body,
        ConnectionInfo connectionInfo) throws IOException {
      beforePublish(call, properties);
    }

    private static void beforePublish(PublishCall call, AMQP.BasicProperties properties) throws IOException {
      if ("assert".equals(properties.getMessageId())) {
        throw new AssertionError("hook invariant broken");
      }
      if ("overflow".equals(properties.getMessageId())) {
        throw new StackOverflowError();
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
}
