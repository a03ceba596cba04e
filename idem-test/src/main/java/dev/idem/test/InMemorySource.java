package dev.idem.test;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;

/**
 * A broker stand-in for tests: messages sent to it reach the pipeline through {@link #receive()},
 * and it keeps every delivery so that a test can read how each was settled.
 *
 * <p>{@link #receive()} may be subscribed once; it honours backpressure (messages sent ahead of
 * demand wait in an unbounded buffer) and completes after {@link #complete()}. Thread-safe.
 *
 * @param <T> the payload type
 */
public final class InMemorySource<T> {

  private final Sinks.Many<InMemoryDelivery<T>> sink = Sinks.many().unicast().onBackpressureBuffer();
  private final List<InMemoryDelivery<T>> sent = new CopyOnWriteArrayList<>();

  /** Creates an empty, open source. */
  public InMemorySource() {}

  /**
   * A source holding these deliveries, already completed: {@code process(...)} completes after
   * they are settled.
   *
   * @param deliveries the deliveries, in order
   * @param <T> the payload type
   * @return the source
   */
  @SafeVarargs
  public static <T> InMemorySource<T> of(InMemoryDelivery<T>... deliveries) {
    InMemorySource<T> source = new InMemorySource<>();
    for (InMemoryDelivery<T> delivery : deliveries) {
      source.send(delivery);
    }
    source.complete();
    return source;
  }

  /**
   * Hands a delivery to the pipeline. After the pipeline cancelled its subscription (it was
   * stopped) the delivery is only kept, and listed by {@link #unsettled()}, as a broker keeps it
   * for the next consumer.
   *
   * @param delivery the delivery
   * @return the delivery, to read its settlement later
   * @throws IllegalStateException when the source was completed
   */
  public InMemoryDelivery<T> send(InMemoryDelivery<T> delivery) {
    Objects.requireNonNull(delivery, "delivery");
    sent.add(delivery);
    Sinks.EmitResult result = sink.tryEmitNext(delivery);
    if (result.isFailure() && result != Sinks.EmitResult.FAIL_CANCELLED) {
      throw new IllegalStateException("cannot send " + delivery + ": " + result);
    }
    return delivery;
  }

  /** Ends the stream: the pipeline completes once what was sent is settled. */
  public void complete() {
    sink.tryEmitComplete();
  }

  /**
   * The deliveries, for {@code consumer.process(source.receive())}.
   *
   * @return a flux that may be subscribed once
   */
  public Flux<InMemoryDelivery<T>> receive() {
    return sink.asFlux();
  }

  /**
   * Every delivery sent, in order.
   *
   * @return an unmodifiable snapshot
   */
  public List<InMemoryDelivery<T>> sent() {
    return List.copyOf(sent);
  }

  /**
   * The deliveries not settled, as a broker would redeliver them after a crash.
   *
   * @return an unmodifiable snapshot, in order
   */
  public List<InMemoryDelivery<T>> unsettled() {
    return sent.stream().filter(d -> d.settledAs() == null).toList();
  }
}
