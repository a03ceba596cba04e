package dev.idem.test;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * A message for handler tests: no broker, its settlement recorded in memory.
 *
 * <p>{@link AbstractDelivery} makes {@link #ack()} and {@link #deadLetter(DeadLetter)} idempotent
 * and thread-safe, as the pipeline expects of every delivery; this class records which one
 * settled it. Instances are immutable apart from that record; the {@code with...} methods return
 * copies that are not settled. Defaults: no ordering key, no headers, delivery attempt 1, the
 * timestamp of creation.
 *
 * @param <T> the payload type
 */
public final class InMemoryDelivery<T> extends AbstractDelivery<T> {

  private final @Nullable String id;
  private final @Nullable T payload;
  private final @Nullable String key;
  private final Map<String, String> headers;
  private final int deliveryAttempt;
  private final Instant timestamp;
  private final AtomicReference<Settled> settled = new AtomicReference<>();

  private InMemoryDelivery(@Nullable String id, @Nullable T payload, @Nullable String key, Map<String, String> headers,
      int deliveryAttempt, Instant timestamp) {
    this.id = id;
    this.payload = payload;
    this.key = key;
    this.headers = Map.copyOf(headers);
    this.deliveryAttempt = deliveryAttempt;
    this.timestamp = timestamp;
  }

  /**
   * A first delivery of a message.
   *
   * @param id the message id; {@code null} to test a message without one (it is dead-lettered)
   * @param payload the payload; {@code null} to test a message without one (it is dead-lettered)
   * @param <T> the payload type
   * @return the delivery, not settled
   */
  public static <T> InMemoryDelivery<T> of(@Nullable String id, @Nullable T payload) {
    return new InMemoryDelivery<>(id, payload, null, Map.of(), 1, Instant.now());
  }

  /**
   * A copy with an ordering key, which {@link dev.idem.Ordering#BY_KEY} keeps in order.
   *
   * @param orderingKey the key, or {@code null} for none
   * @return the copy
   */
  public InMemoryDelivery<T> withKey(@Nullable String orderingKey) {
    return new InMemoryDelivery<>(id, payload, orderingKey, headers, deliveryAttempt, timestamp);
  }

  /**
   * A copy with these headers.
   *
   * @param newHeaders the headers (copied)
   * @return the copy
   */
  public InMemoryDelivery<T> withHeaders(Map<String, String> newHeaders) {
    return new InMemoryDelivery<>(id, payload, key, Objects.requireNonNull(newHeaders, "headers"), deliveryAttempt,
        timestamp);
  }

  /**
   * A copy with another id, as an id rule computed it.
   *
   * @param newId the id
   * @return the copy
   */
  public InMemoryDelivery<T> withId(@Nullable String newId) {
    return new InMemoryDelivery<>(newId, payload, key, headers, deliveryAttempt, timestamp);
  }

  /**
   * The same message delivered again, as a broker does after a lost acknowledgement: the same
   * id, payload, key and headers, the next delivery attempt and a new timestamp.
   *
   * @return the redelivery, not settled
   */
  public InMemoryDelivery<T> redelivered() {
    return new InMemoryDelivery<>(id, payload, key, headers, deliveryAttempt + 1, Instant.now());
  }

  @Override
  public @Nullable String id() {
    return id;
  }

  @Override
  public @Nullable T payload() {
    return payload;
  }

  @Override
  public @Nullable String orderingKey() {
    return key;
  }

  @Override
  public Map<String, String> headers() {
    return headers;
  }

  @Override
  public int deliveryAttempt() {
    return deliveryAttempt;
  }

  @Override
  public Instant timestamp() {
    return timestamp;
  }

  @Override
  protected Mono<Void> doAck() {
    return Mono.fromRunnable(() -> settled.set(new Settled(null)));
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return Mono.fromRunnable(() -> settled.set(new Settled(deadLetter)));
  }

  /**
   * Tells whether the pipeline acknowledged the message (after its commit, or as a duplicate).
   *
   * @return {@code true} once acknowledged without a dead letter
   */
  public boolean isAcked() {
    Settled s = settled.get();
    return s != null && s.deadLetter == null;
  }

  /**
   * The dead letter the pipeline settled the message with.
   *
   * @return the dead letter, or {@code null} when the message was not dead-lettered
   */
  public @Nullable DeadLetter deadLetter() {
    Settled s = settled.get();
    return s == null ? null : s.deadLetter;
  }

  /**
   * How the message was settled, for assertions and messages.
   *
   * @return {@code "ack"}, {@code "dead letter: <reason>"}, or {@code null} when not settled
   *     (the pipeline was cancelled before, so a broker would redeliver it)
   */
  public @Nullable String settledAs() {
    Settled s = settled.get();
    if (s == null) {
      return null;
    }
    return s.deadLetter == null ? "ack" : "dead letter: " + s.deadLetter.reason();
  }

  @Override
  public String toString() {
    return "InMemoryDelivery[id=" + id + ", key=" + key + ", attempt=" + deliveryAttempt + ", settled="
        + settledAs() + "]";
  }

  private record Settled(@Nullable DeadLetter deadLetter) {}
}
