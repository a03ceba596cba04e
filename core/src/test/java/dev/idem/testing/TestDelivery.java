package dev.idem.testing;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;

/**
 * An in-memory delivery that records how it was settled, for testing the broker-agnostic core.
 * The broker is not what these tests check; the database is real. A delivery whose id has an
 * even hash acknowledges in place, as the Kafka adapter's do, the others only through
 * {@link #ack()}, as RabbitMQ's do: so the core's suites run both ways, and batches that mix them.
 *
 * @param <T> the payload type
 */
public final class TestDelivery<T> extends AbstractDelivery<T> {

  private final String id;
  private final T payload;
  private final String key;
  private final Throwable decodingFailure;
  private final int attempt;
  private final boolean loseAck;
  private final AtomicInteger acks = new AtomicInteger();
  private final AtomicReference<DeadLetter> deadLetter = new AtomicReference<>();

  private TestDelivery(String id, T payload, String key, Throwable decodingFailure, int attempt, boolean loseAck) {
    this.id = id;
    this.payload = payload;
    this.key = key;
    this.decodingFailure = decodingFailure;
    this.attempt = attempt;
    this.loseAck = loseAck;
  }

  /**
   * A delivery with an id and a payload.
   *
   * @param id the message id
   * @param payload the payload
   * @param <T> the payload type
   * @return the delivery
   */
  public static <T> TestDelivery<T> of(String id, T payload) {
    return new TestDelivery<>(id, payload, null, null, 1, false);
  }

  /**
   * A delivery with an ordering key.
   *
   * @param id the message id
   * @param key the ordering key
   * @param payload the payload
   * @param <T> the payload type
   * @return the delivery
   */
  public static <T> TestDelivery<T> keyed(String id, String key, T payload) {
    return new TestDelivery<>(id, payload, key, null, 1, false);
  }

  /**
   * A delivery whose payload could not be decoded.
   *
   * @param id the message id
   * @param failure the decoding error
   * @param <T> the payload type
   * @return the delivery
   */
  public static <T> TestDelivery<T> undecodable(String id, Throwable failure) {
    return new TestDelivery<>(id, null, null, failure, 1, false);
  }

  /**
   * The same message delivered again by the broker (attempt + 1), with a working ack.
   *
   * @return the redelivery
   */
  public TestDelivery<T> redelivered() {
    return new TestDelivery<>(id, payload, key, decodingFailure, attempt + 1, false);
  }

  /**
   * The same message as the broker's {@code attempt}-th delivery of it, with a working ack.
   *
   * @param attempt the broker's delivery count, at least 1
   * @return the delivery
   */
  public TestDelivery<T> deliveredTimes(int attempt) {
    return new TestDelivery<>(id, payload, key, decodingFailure, attempt, false);
  }

  /**
   * The same delivery, but its acknowledgement fails as if the process crashed after commit.
   *
   * @return a delivery whose ack fails
   */
  public TestDelivery<T> withLostAck() {
    return new TestDelivery<>(id, payload, key, decodingFailure, attempt, true);
  }

  @Override
  public String id() {
    return id;
  }

  @Override
  public T payload() {
    return payload;
  }

  @Override
  public Throwable decodingFailure() {
    return decodingFailure;
  }

  @Override
  public String orderingKey() {
    return key;
  }

  @Override
  public Instant timestamp() {
    return Instant.EPOCH;
  }

  @Override
  public int deliveryAttempt() {
    return attempt;
  }

  @Override
  public Map<String, String> headers() {
    return Map.of();
  }

  @Override
  protected Mono<Void> doAck() {
    if (loseAck) {
      return Mono.error(new IllegalStateException("simulated crash between commit and ack"));
    }
    return Mono.fromRunnable(acks::incrementAndGet);
  }

  @Override
  protected boolean acksInPlace() {
    return id == null || id.hashCode() % 2 == 0;
  }

  @Override
  protected void doAckInPlace() {
    if (loseAck) {
      throw new IllegalStateException("simulated crash between commit and ack");
    }
    acks.incrementAndGet();
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter letter) {
    return Mono.fromRunnable(() -> {
      deadLetter.set(letter);
      acks.incrementAndGet();
    });
  }

  /**
   * How many acknowledgements reached the (pretend) broker; settlement is idempotent, so at most 1.
   *
   * @return the count
   */
  public int ackCount() {
    return acks.get();
  }

  /**
   * The dead letter, if the message was dead-lettered.
   *
   * @return the dead letter or {@code null}
   */
  public DeadLetter deadLetter() {
    return deadLetter.get();
  }

  @Override
  public String toString() {
    return "TestDelivery[" + id + ", attempt " + attempt + "]";
  }
}
