package dev.idem.outbox;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * A message to write to the outbox in the handler's transaction, for the {@link OutboxRelay} to
 * send after commit. Built with {@link #to(String)}; immutable.
 *
 * <pre>{@code
 * tx.outbox(outbox, OutboxRecord.to("refund-notifications")
 *     .key(refund.customerId())
 *     .payload("Your refund is on its way")
 *     .header("content-type", "text/plain")
 *     .build());
 * }</pre>
 *
 * <p>Guarantees: every field is checked when built (PostgreSQL text cannot hold NUL characters,
 * so none may contain one), and the payload is copied, so later changes to the caller's array
 * do not reach the row. The message id is a random UUID unless {@link Builder#id(String)} sets
 * one (for example derived from the inbound message id); either way it is stored with the row and
 * sent with every attempt, so downstream consumers and providers can deduplicate on it.
 */
public final class OutboxRecord {

  /** Longest accepted message id, in characters: {@value}. */
  public static final int MAX_ID_LENGTH = 255;

  private final String destination;
  private final @Nullable String key;
  private final byte[] payload;
  private final Map<String, String> headers;
  private final @Nullable String id;

  private OutboxRecord(Builder b) {
    this.destination = b.destination;
    this.key = b.key;
    this.payload = Objects.requireNonNull(b.payload).clone();
    this.headers = Collections.unmodifiableMap(new LinkedHashMap<>(b.headers));
    this.id = b.id;
  }

  /**
   * Starts a record for a destination: a Kafka topic, a RabbitMQ routing key, or whatever a
   * custom {@link OutboxPublisher} understands.
   *
   * @param destination not blank, no NUL character
   * @return a builder
   */
  public static Builder to(String destination) {
    return new Builder(requireText("destination", destination));
  }

  /**
   * Where the message goes.
   *
   * @return the destination
   */
  public String destination() {
    return destination;
  }

  /**
   * The ordering (and partitioning) key.
   *
   * @return the key, or {@code null} for none (rows without a key are not ordered)
   */
  public @Nullable String key() {
    return key;
  }

  /**
   * The payload.
   *
   * @return a copy of the payload bytes
   */
  public byte[] payload() {
    return payload.clone();
  }

  /**
   * The headers.
   *
   * @return an unmodifiable map, in insertion order
   */
  public Map<String, String> headers() {
    return headers;
  }

  /**
   * The message id set by the caller.
   *
   * @return the id, or {@code null} when the outbox assigns a random UUID
   */
  public @Nullable String id() {
    return id;
  }

  @Override
  public String toString() {
    return "OutboxRecord[destination=" + destination + ", key=" + key + ", payload=" + payload.length + " bytes, headers="
        + headers.keySet() + (id == null ? "" : ", id=" + id) + "]";
  }

  private static String requireText(String name, @Nullable String value) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(name + " must not be blank, was: " + (value == null ? "null" : "'" + value + "'"));
    }
    return requireNoNul(name, value);
  }

  private static String requireNoNul(String name, String value) {
    if (value.indexOf('\0') >= 0) {
      throw new IllegalArgumentException(name + " must not contain a NUL character (PostgreSQL text cannot store it)");
    }
    return value;
  }

  /** Builds an {@link OutboxRecord}; every setter checks its argument and names it in the error. */
  public static final class Builder {
    private final String destination;
    private @Nullable String key;
    private byte @Nullable [] payload;
    private final Map<String, String> headers = new LinkedHashMap<>();
    private @Nullable String id;

    private Builder(String destination) {
      this.destination = destination;
    }

    /**
     * The ordering key: with {@link RelayOrdering#BY_KEY} (the default) rows of one key are
     * sent one at a time in sequence order. Kafka uses it as the record key. Default none.
     *
     * @param key not blank, no NUL character; {@code null} for none
     * @return this builder
     */
    public Builder key(@Nullable String key) {
      this.key = key == null ? null : requireText("key", key);
      return this;
    }

    /**
     * The payload bytes. Required.
     *
     * @param payload the bytes, copied
     * @return this builder
     */
    public Builder payload(byte[] payload) {
      this.payload = Objects.requireNonNull(payload, "payload").clone();
      return this;
    }

    /**
     * The payload as UTF-8 text. Required (this or {@link #payload(byte[])}).
     *
     * @param payload the text
     * @return this builder
     */
    public Builder payload(String payload) {
      this.payload = Objects.requireNonNull(payload, "payload").getBytes(StandardCharsets.UTF_8);
      return this;
    }

    /**
     * Adds a text header. Default none.
     *
     * @param name not blank, no NUL character
     * @param value not {@code null}, no NUL character
     * @return this builder
     */
    public Builder header(String name, String value) {
      requireText("header name", name);
      requireNoNul("header '" + name + "'", Objects.requireNonNull(value, "header '" + name + "' value"));
      headers.put(name, value);
      return this;
    }

    /**
     * Adds text headers.
     *
     * @param headers names to values, as for {@link #header}
     * @return this builder
     */
    public Builder headers(Map<String, String> headers) {
      Objects.requireNonNull(headers, "headers").forEach(this::header);
      return this;
    }

    /**
     * A message id chosen by the caller instead of a random UUID, for example
     * {@code tx.messageId() + "/notification"}: stable across everything, even a rebuilt outbox.
     * Ids are not checked for uniqueness by the outbox.
     *
     * @param id not blank, at most {@value OutboxRecord#MAX_ID_LENGTH} characters, no NUL character
     * @return this builder
     */
    public Builder id(String id) {
      requireText("id", id);
      if (id.length() > MAX_ID_LENGTH) {
        throw new IllegalArgumentException("id must be at most " + MAX_ID_LENGTH + " characters, was " + id.length());
      }
      this.id = id;
      return this;
    }

    /**
     * Builds the record.
     *
     * @return the record
     * @throws IllegalArgumentException when the payload is missing
     */
    public OutboxRecord build() {
      if (payload == null) {
        throw new IllegalArgumentException("payload is required (an empty array is allowed)");
      }
      return new OutboxRecord(this);
    }
  }
}
