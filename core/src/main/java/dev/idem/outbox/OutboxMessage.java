package dev.idem.outbox;

import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * An outbox row as the {@link OutboxRelay} hands it to an {@link OutboxPublisher}: what to send
 * and the stable id to send it with.
 *
 * <p>{@link #id()} is the same on every attempt and after a relay crash; publishers send it as the
 * message id ({@code message-id} header on Kafka, the AMQP {@code message-id} property on
 * RabbitMQ) or as a provider's idempotency key, so that a message the relay sends twice (it is
 * at least once) is deduplicated downstream. Immutable.
 */
public final class OutboxMessage {

  private final long seq;
  private final String id;
  private final String destination;
  private final @Nullable String key;
  private final byte[] payload;
  private final Map<String, String> headers;
  private final int attempt;
  private final Instant createdAt;

  /**
   * Creates a message; the relay does, and tests of publishers may.
   *
   * @param seq the row's sequence number (its order in the outbox)
   * @param id the stable message id
   * @param destination where it goes
   * @param key the ordering key, or {@code null}
   * @param payload the payload, copied
   * @param headers text headers, copied
   * @param attempt which attempt this is, from 1
   * @param createdAt when the row was written
   */
  public OutboxMessage(long seq, String id, String destination, @Nullable String key, byte[] payload, Map<String, String> headers,
      int attempt, Instant createdAt) {
    this.seq = seq;
    this.id = Objects.requireNonNull(id, "id");
    this.destination = Objects.requireNonNull(destination, "destination");
    this.key = key;
    this.payload = Objects.requireNonNull(payload, "payload").clone();
    this.headers = Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(headers, "headers")));
    this.attempt = attempt;
    this.createdAt = Objects.requireNonNull(createdAt, "createdAt");
  }

  /**
   * The row's sequence number: rows of one key are sent in this order.
   *
   * @return the sequence number
   */
  public long seq() {
    return seq;
  }

  /**
   * The stable message id: the idempotency key for the destination.
   *
   * @return the id
   */
  public String id() {
    return id;
  }

  /**
   * Where the message goes (topic, routing key, URL, ...).
   *
   * @return the destination
   */
  public String destination() {
    return destination;
  }

  /**
   * The ordering key.
   *
   * @return the key, or {@code null}
   */
  public @Nullable String key() {
    return key;
  }

  /**
   * The payload.
   *
   * @return a copy of the bytes
   */
  public byte[] payload() {
    return payload.clone();
  }

  /**
   * The headers written with the row.
   *
   * @return an unmodifiable map
   */
  public Map<String, String> headers() {
    return headers;
  }

  /**
   * Which publish attempt this is: 1 the first time, more after failures or a relay crash that
   * were recorded (a relay crash between publish and mark records no attempt).
   *
   * @return the attempt number, from 1
   */
  public int attempt() {
    return attempt;
  }

  /**
   * When the row was written (the transaction's start time).
   *
   * @return the time
   */
  public Instant createdAt() {
    return createdAt;
  }

  @Override
  public String toString() {
    return "OutboxMessage[seq=" + seq + ", id=" + id + ", destination=" + destination + ", key=" + key
        + ", payload=" + payload.length + " bytes, attempt=" + attempt + "]";
  }
}
