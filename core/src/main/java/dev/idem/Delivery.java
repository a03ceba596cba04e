package dev.idem;

import java.time.Instant;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * One message as a broker adapter hands it to the pipeline: what it says, where it came from,
 * and how to settle it.
 *
 * <p>Adapters implement this interface (usually by extending {@link AbstractDelivery}, which
 * makes settlement idempotent). The pipeline reads the metadata, runs the message through its
 * transaction and finally calls exactly one of {@link #ack()} or {@link #deadLetter(DeadLetter)}
 * &mdash; or neither, when the message must be redelivered (the pipeline was cancelled, or the
 * database was unreachable at shutdown).
 *
 * <h2>Settlement contract</h2>
 * <ul>
 *   <li>{@link #ack()} and {@link #deadLetter(DeadLetter)} are idempotent and thread-safe: the
 *       first call settles, later calls return the first call's result without doing anything.</li>
 *   <li>They never throw; failures travel as {@code onError} of the returned {@link Mono}.</li>
 *   <li>{@link #deadLetter(DeadLetter)} completes only after the dead letter is durable (broker
 *       confirm) and the original delivery acknowledged.</li>
 * </ul>
 *
 * @param <T> the decoded payload type
 */
public interface Delivery<T> {

  /**
   * The deduplication key: the broker's message id, a producer-supplied event id or a domain key.
   *
   * @return the id, or {@code null} when the message carries none (it is then dead-lettered)
   */
  @Nullable
  String id();

  /**
   * The decoded payload.
   *
   * @return the payload, or {@code null} when there is none or it could not be decoded
   */
  @Nullable
  T payload();

  /**
   * Why the payload could not be decoded, for poison messages.
   *
   * @return the decoding failure, or {@code null} (the default) when the payload decoded
   */
  default @Nullable Throwable decodingFailure() {
    return null;
  }

  /**
   * Broker headers and properties rendered as strings.
   *
   * @return an immutable map, empty by default
   */
  default Map<String, String> headers() {
    return Map.of();
  }

  /**
   * The key whose messages {@link Ordering#BY_KEY} never runs concurrently.
   *
   * @return the ordering key, or {@code null} for none (such messages are not ordered)
   */
  default @Nullable String orderingKey() {
    return null;
  }

  /**
   * The message's own key, as the handler sees it in {@link MessageMetadata#key()}. Unlike
   * {@link #orderingKey()} it has no fallback: a Kafka record without a key has none.
   *
   * @return the key, by default the {@link #orderingKey()}; {@code null} for none
   */
  default @Nullable String key() {
    return orderingKey();
  }

  /**
   * The broker partition the message came from, used by {@link Ordering#BY_PARTITION}.
   *
   * @return a partition name such as {@code "orders-3"}, or {@code null} when the broker has none
   */
  default @Nullable String partition() {
    return null;
  }

  /**
   * When the broker or producer stamped the message.
   *
   * @return the timestamp, or {@code null} when unknown
   */
  default @Nullable Instant timestamp() {
    return null;
  }

  /**
   * How often the broker has delivered this message, counting this delivery (1 for the first).
   *
   * @return the delivery attempt, at least 1
   */
  default int deliveryAttempt() {
    return 1;
  }

  /**
   * The most order the source keeps among its messages. A queue or a partition hands messages
   * over in order ({@link Ordering#BY_KEY}, the default), so {@link Ordering#BY_KEY} and
   * {@link Ordering#BY_PARTITION} can keep it. A source whose broker hands one partition's messages
   * to several consumers at once (a Kafka share group) keeps none and says
   * {@link Ordering#UNORDERED}: a consumer that asks for an order then fails at its first message
   * with an {@link IllegalArgumentException} saying so, rather than promise an order nobody keeps.
   *
   * @return {@link Ordering#BY_KEY} by default
   */
  default Ordering sourceOrdering() {
    return Ordering.BY_KEY;
  }

  /**
   * Where the message sits in the broker, with the keys of {@link MessageMetadata} (for example
   * {@value MessageMetadata#KAFKA_TOPIC}, {@value MessageMetadata#KAFKA_PARTITION},
   * {@value MessageMetadata#KAFKA_OFFSET}, or {@value MessageMetadata#RABBITMQ_EXCHANGE} and
   * {@value MessageMetadata#RABBITMQ_ROUTING_KEY}). Shown to the handler by
   * {@link MessageMetadata#broker()}.
   *
   * @return an immutable map, empty by default
   */
  default Map<String, String> brokerCoordinates() {
    return Map.of();
  }

  /**
   * Acknowledges the message to the broker: it will not be delivered again.
   *
   * @return completes when the broker was told (or the acknowledgement was queued, for brokers
   *     that commit positions in batches)
   */
  Mono<Void> ack();

  /**
   * Sends the message to the dead-letter destination with the reason, then acknowledges it.
   *
   * @param deadLetter why the message cannot be processed
   * @return completes when the dead letter is durable and the original acknowledged
   */
  Mono<Void> deadLetter(DeadLetter deadLetter);
}
