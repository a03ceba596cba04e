package dev.idem.rabbit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.GetResponse;
import dev.idem.internal.LogText;
import dev.idem.rabbit.internal.HeaderValues;
import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Moves messages from a dead-letter queue back to where they were first published, once the cause
 * of their failure is fixed.
 *
 * <pre>{@code
 * try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create("amqp://guest:guest@localhost:5672")) {
 *   long moved = replayer.replay("payments.dlq", m -> "RETRIES_EXHAUSTED".equals(m.reason())).block();
 * }
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li>The replayed copy keeps the body, the properties and the message id, so the consumer's
 *       inbox deduplicates it: replaying a message twice, or one that was already processed,
 *       still yields one effect.</li>
 *   <li>A message leaves the dead-letter queue only after its copy was published with the
 *       {@code mandatory} flag and confirmed by the broker; an unroutable copy fails the replay
 *       and the message stays.</li>
 *   <li>Messages the filter rejects, or whose origin is unknown, stay in the dead-letter queue.</li>
 *   <li>One call looks at most at the messages that were in the queue when it started, so it
 *       terminates while new dead letters keep arriving.</li>
 * </ul>
 *
 * <p>The origin is read from the {@link RabbitHeaders#ORIGINAL_EXCHANGE} and
 * {@link RabbitHeaders#ORIGINAL_ROUTING_KEY} headers that {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS}
 * writes, or from the broker's {@code x-death} header for messages the broker dead-lettered. The
 * replayed copy drops the reason and {@code x-death} headers and counts
 * {@link RabbitHeaders#REPLAY_COUNT}. Thread-safe; one connection per replayer.
 */
public final class RabbitDeadLetterReplayer implements AutoCloseable {

  /** Default time to wait for the broker's confirm of one replayed message: 30 s. */
  public static final Duration DEFAULT_CONFIRM_TIMEOUT = Duration.ofSeconds(30);

  private static final Logger log = LoggerFactory.getLogger(RabbitDeadLetterReplayer.class);
  private static final List<String> DROPPED_HEADERS = List.of(RabbitHeaders.REASON, RabbitHeaders.DETAIL,
      RabbitHeaders.ERROR_CLASS, RabbitHeaders.ERROR_MESSAGE, RabbitHeaders.DEAD_LETTERED_AT, RabbitHeaders.PUBLISH_SEQUENCE,
      "x-death",
      "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
      "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason");

  private final ConnectionFactory factory;
  private @Nullable Connection connection;

  private RabbitDeadLetterReplayer(ConnectionFactory factory) {
    this.factory = factory;
  }

  /**
   * A replayer on a broker URI.
   *
   * @param uri an {@code amqp://} URI, e.g. {@value RabbitSourceOptions#DEFAULT_URI}
   * @return the replayer; close it when done
   */
  public static RabbitDeadLetterReplayer create(String uri) {
    Objects.requireNonNull(uri, "uri");
    return new RabbitDeadLetterReplayer(RabbitSourceOptions.builder("replayer").uri(uri).build().newConnectionFactory());
  }

  /**
   * A replayer with a client connection factory (TLS, custom settings).
   *
   * @param factory the factory
   * @return the replayer; close it when done
   */
  public static RabbitDeadLetterReplayer create(ConnectionFactory factory) {
    return new RabbitDeadLetterReplayer(Objects.requireNonNull(factory, "factory"));
  }

  /**
   * Replays every message of a dead-letter queue whose origin is known.
   *
   * @param deadLetterQueue the queue, e.g. {@code payments.dlq}
   * @return the number of messages moved
   */
  public Mono<Long> replayAll(String deadLetterQueue) {
    return replay(deadLetterQueue, message -> true);
  }

  /**
   * Replays the messages of a dead-letter queue that match a filter. Runs on a bounded-elastic
   * thread.
   *
   * @param deadLetterQueue the queue, e.g. {@code payments.dlq}
   * @param filter which messages to move; the others stay
   * @return the number of messages moved
   */
  public Mono<Long> replay(String deadLetterQueue, Predicate<DeadLetteredMessage> filter) {
    Objects.requireNonNull(deadLetterQueue, "deadLetterQueue");
    Objects.requireNonNull(filter, "filter");
    return Mono.fromCallable(() -> replayBlocking(deadLetterQueue, filter)).subscribeOn(Schedulers.boundedElastic());
  }

  private long replayBlocking(String queue, Predicate<DeadLetteredMessage> filter)
      throws IOException, TimeoutException, InterruptedException {
    Channel channel = connection().createChannel();
    try {
      channel.confirmSelect();
      AtomicBoolean returned = new AtomicBoolean();
      channel.addReturnListener(r -> returned.set(true));
      long present = channel.queueDeclarePassive(queue).getMessageCount();
      long replayed = 0;
      for (long i = 0; i < present; i++) {
        GetResponse response = channel.basicGet(queue, false);
        if (response == null) {
          break;
        }
        DeadLetteredMessage message = describe(response);
        if (!message.hasTarget()) {
          log.warn("Dead letter '{}' in '{}' has no known origin; left in place", LogText.id(message.messageId()), queue);
          continue;
        }
        if (!filter.test(message)) {
          continue;
        }
        returned.set(false);
        channel.basicPublish(message.targetExchange(), message.targetRoutingKey(), true,
            replayProperties(response.getProps()), response.getBody());
        channel.waitForConfirmsOrDie(DEFAULT_CONFIRM_TIMEOUT.toMillis());
        if (returned.get()) {
          throw new IOException("replayed message '" + LogText.id(message.messageId()) + "' was unroutable: exchange '"
              + LogText.id(message.targetExchange()) + "', routing key '" + LogText.id(message.targetRoutingKey()) + "'");
        }
        channel.basicAck(response.getEnvelope().getDeliveryTag(), false);
        replayed++;
      }
      log.info("Replayed {} message(s) from '{}'", replayed, queue);
      return replayed;
    } finally {
      // Messages left unacknowledged (filtered out, unknown origin) return to the queue.
      if (channel.isOpen()) {
        channel.close();
      }
    }
  }

  static DeadLetteredMessage describe(GetResponse response) {
    AMQP.BasicProperties props = response.getProps();
    Map<String, Object> headers = props.getHeaders() == null ? Map.of() : props.getHeaders();
    String exchange = HeaderValues.render(headers.get(RabbitHeaders.ORIGINAL_EXCHANGE));
    String routingKey = HeaderValues.render(headers.get(RabbitHeaders.ORIGINAL_ROUTING_KEY));
    if ((exchange == null || routingKey == null) && headers.get("x-death") instanceof List<?> deaths
        && !deaths.isEmpty() && deaths.get(deaths.size() - 1) instanceof Map<?, ?> first) {
      // x-death lists the most recent death first; the last entry is the original publication.
      exchange = HeaderValues.render(first.get("exchange"));
      Object keys = first.get("routing-keys");
      routingKey = keys instanceof List<?> list && !list.isEmpty() ? HeaderValues.render(list.get(0)) : null;
    }
    return new DeadLetteredMessage(props.getMessageId(), HeaderValues.render(headers.get(RabbitHeaders.REASON)),
        HeaderValues.render(headers.get(RabbitHeaders.CONSUMER)), exchange, routingKey,
        HeaderValues.renderAll(response.getEnvelope(), props), response.getBody());
  }

  static AMQP.BasicProperties replayProperties(AMQP.BasicProperties original) {
    Map<String, Object> headers = original.getHeaders() == null ? new HashMap<>() : new HashMap<>(original.getHeaders());
    DROPPED_HEADERS.forEach(headers::remove);
    Object count = headers.get(RabbitHeaders.REPLAY_COUNT);
    int previous = count instanceof Number n ? n.intValue() : 0;
    headers.put(RabbitHeaders.REPLAY_COUNT, previous + 1);
    return original.builder().headers(headers).build();
  }

  private synchronized Connection connection() throws IOException, TimeoutException {
    if (connection == null || !connection.isOpen()) {
      connection = factory.newConnection("idem-dead-letter-replayer");
    }
    return connection;
  }

  /** Closes the replayer's connection. */
  @Override
  public synchronized void close() {
    if (connection != null && connection.isOpen()) {
      try {
        connection.close();
      } catch (IOException e) {
        log.debug("Closing the replayer connection failed: {}", LogText.error(e));
      }
    }
    connection = null;
  }
}
