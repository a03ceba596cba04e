package dev.idem.spring;

import dev.idem.Delivery;
import java.util.Objects;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;

/**
 * Where a consumer declared as a bean gets its messages: usually a {@code KafkaSource} or a
 * {@code RabbitSource}, given as {@code ConsumerSource.of(source::receive, source)}.
 *
 * <p>{@link #receive()} is subscribed once when the application starts; the subscription is
 * cancelled on shutdown (after the grace period), and then {@link #close()} is called.
 *
 * @param <T> the payload type
 */
public interface ConsumerSource<T> extends AutoCloseable {

  /**
   * The deliveries. Subscribed once per start.
   *
   * @return the deliveries
   */
  Publisher<? extends Delivery<T>> receive();

  /** Releases what the source holds (a dead-letter producer, a broker connection). Default: nothing. */
  @Override
  default void close() {}

  /**
   * A source from a receive function and the resource to close after it.
   *
   * @param receive returns the deliveries, for example {@code kafkaSource::receive}
   * @param resource closed on shutdown, for example the {@code KafkaSource} itself
   * @param <T> the payload type
   * @return the source
   */
  static <T> ConsumerSource<T> of(Supplier<? extends Publisher<? extends Delivery<T>>> receive, AutoCloseable resource) {
    Objects.requireNonNull(receive, "receive");
    Objects.requireNonNull(resource, "resource");
    return new ResourceConsumerSource<>(receive, resource);
  }
}
