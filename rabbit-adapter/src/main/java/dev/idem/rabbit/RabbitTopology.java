package dev.idem.rabbit;

import com.rabbitmq.client.BuiltinExchangeType;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeoutException;

/**
 * Declares the queues a {@link RabbitSource} expects, for quick starts and tests. Production
 * topologies usually live in infrastructure code; these names are the defaults of
 * {@link RabbitSourceOptions}.
 *
 * <p>For a queue {@code q}, {@link #declare} creates, idempotently:
 * <ul>
 *   <li>the direct exchange {@code q.dlx} (durable);</li>
 *   <li>the queue {@code q.dlq} (durable, same type as {@code q}), bound to {@code q.dlx} with
 *       routing key {@code q};</li>
 *   <li>the queue {@code q} (durable) with {@code x-dead-letter-exchange = q.dlx} and
 *       {@code x-dead-letter-routing-key = q}, so both {@link DeadLetterMode}s land in
 *       {@code q.dlq}. Quorum queues also get {@code x-dead-letter-strategy = at-least-once} and
 *       {@code x-overflow = reject-publish}, which make broker dead-lettering at-least-once.</li>
 * </ul>
 * Declaring an existing queue with other arguments fails with the broker's
 * {@code PRECONDITION_FAILED}; the methods never delete or change existing queues.
 */
public final class RabbitTopology {

  /** The kind of queue to declare. */
  public enum QueueType {
    /** A classic queue: single node, lowest overhead. */
    CLASSIC,
    /** A replicated quorum queue; it counts deliveries in {@code x-delivery-count}. */
    QUORUM
  }

  /**
   * The declared names.
   *
   * @param queue the work queue
   * @param deadLetterExchange its dead-letter exchange
   * @param deadLetterQueue its dead-letter queue
   */
  public record Declared(String queue, String deadLetterExchange, String deadLetterQueue) {}

  private RabbitTopology() {}

  /**
   * The default dead-letter exchange name of a queue.
   *
   * @param queue the queue
   * @return {@code queue + ".dlx"}
   */
  public static String deadLetterExchange(String queue) {
    return queue + RabbitSourceOptions.DEFAULT_DEAD_LETTER_EXCHANGE_SUFFIX;
  }

  /**
   * The default dead-letter queue name of a queue.
   *
   * @param queue the queue
   * @return {@code queue + ".dlq"}
   */
  public static String deadLetterQueue(String queue) {
    return queue + ".dlq";
  }

  /**
   * Declares the queue, its dead-letter exchange and its dead-letter queue. Blocking.
   *
   * @param connection an open connection
   * @param queue the queue name
   * @param type classic or quorum
   * @return the names
   * @throws IOException when the broker refuses a declaration
   */
  public static Declared declare(Connection connection, String queue, QueueType type) throws IOException {
    Objects.requireNonNull(connection, "connection");
    Objects.requireNonNull(queue, "queue");
    Objects.requireNonNull(type, "type");
    String dlx = deadLetterExchange(queue);
    String dlq = deadLetterQueue(queue);
    try (Channel channel = connection.createChannel()) {
      channel.exchangeDeclare(dlx, BuiltinExchangeType.DIRECT, true);
      channel.queueDeclare(dlq, true, false, false, typeArguments(type));
      channel.queueBind(dlq, dlx, queue);
      Map<String, Object> arguments = typeArguments(type);
      arguments.put("x-dead-letter-exchange", dlx);
      arguments.put("x-dead-letter-routing-key", queue);
      if (type == QueueType.QUORUM) {
        arguments.put("x-dead-letter-strategy", "at-least-once");
        arguments.put("x-overflow", "reject-publish");
      }
      channel.queueDeclare(queue, true, false, false, arguments);
    } catch (TimeoutException e) {
      throw new IOException("closing the declaration channel timed out", e);
    }
    return new Declared(queue, dlx, dlq);
  }

  /**
   * Deletes the queue, its dead-letter queue and exchange, whether or not they exist or hold
   * messages. For tests. Blocking.
   *
   * @param connection an open connection
   * @param queue the queue name
   * @throws IOException when the broker refuses
   */
  public static void delete(Connection connection, String queue) throws IOException {
    try (Channel channel = connection.createChannel()) {
      channel.queueDelete(queue);
      channel.queueDelete(deadLetterQueue(queue));
      channel.exchangeDelete(deadLetterExchange(queue));
    } catch (TimeoutException e) {
      throw new IOException("closing the deletion channel timed out", e);
    }
  }

  private static Map<String, Object> typeArguments(QueueType type) {
    Map<String, Object> arguments = new HashMap<>();
    arguments.put("x-queue-type", type == QueueType.QUORUM ? "quorum" : "classic");
    return arguments;
  }
}
