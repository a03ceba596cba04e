package dev.idem.docs;

import dev.idem.AbstractDelivery;
import dev.idem.DeadLetter;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Mono;

// tag::in-memory-delivery[]
/**
 * A message for handler tests: no broker, settlement recorded in memory. {@link AbstractDelivery}
 * makes {@code ack()} and {@code deadLetter(...)} idempotent and thread-safe, as the pipeline
 * expects of every delivery.
 *
 * @param <T> the payload type
 */
final class InMemoryDelivery<T> extends AbstractDelivery<T> {

  private final String id;
  private final T payload;
  private final AtomicReference<String> settledAs = new AtomicReference<>();

  private InMemoryDelivery(String id, T payload) {
    this.id = id;
    this.payload = payload;
  }

  static <T> InMemoryDelivery<T> of(String id, T payload) {
    return new InMemoryDelivery<>(id, payload);
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
  protected Mono<Void> doAck() {
    return Mono.fromRunnable(() -> settledAs.set("ack"));
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return Mono.fromRunnable(() -> settledAs.set("dead letter: " + deadLetter.reason()));
  }

  /** How it was settled: {@code "ack"}, {@code "dead letter: <reason>"}, or {@code null}. */
  String settledAs() {
    return settledAs.get();
  }
}
// end::in-memory-delivery[]
