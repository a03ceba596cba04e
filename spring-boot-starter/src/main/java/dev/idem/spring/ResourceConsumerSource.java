package dev.idem.spring;

import dev.idem.Delivery;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;

/** {@link ConsumerSource#of}: a receive function and the resource behind it, closed with the source. */
final class ResourceConsumerSource<T> implements ConsumerSource<T> {
  private final Supplier<? extends Publisher<? extends Delivery<T>>> receive;
  private final AutoCloseable resource;

  ResourceConsumerSource(Supplier<? extends Publisher<? extends Delivery<T>>> receive, AutoCloseable resource) {
    this.receive = receive;
    this.resource = resource;
  }

  @Override
  public Publisher<? extends Delivery<T>> receive() {
    return receive.get();
  }

  @Override
  public void close() {
    try {
      resource.close();
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException("closing " + resource + " failed: " + e, e);
    }
  }

  @Override
  public String toString() {
    return resource.toString();
  }
}
