package dev.idem.test.internal;

import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.test.InMemoryDelivery;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;
import reactor.core.Disposable;
import reactor.core.publisher.Sinks;

/**
 * One running pipeline of a consumer, fed one delivery at a time from the runner's thread: each
 * {@link #process} waits for that delivery's outcome. Closing it completes the source.
 *
 * @param <T> the payload type
 */
final class Line<T> implements AutoCloseable {

  private final Sinks.Many<InMemoryDelivery<T>> source = Sinks.many().unicast().onBackpressureBuffer();
  private final BlockingQueue<Object> outcomes = new LinkedBlockingQueue<>();
  private final Duration timeout;
  private final IntConsumer counted;
  private final Disposable pipeline;

  Line(IdempotentConsumer<T> consumer, Duration timeout, IntConsumer counted) {
    this.timeout = timeout;
    this.counted = counted;
    this.pipeline = consumer.process(source.asFlux()).subscribe(outcomes::add, outcomes::add);
  }

  /** Hands the pipeline one delivery and waits for its outcome. */
  Outcome<T> process(InMemoryDelivery<T> delivery) {
    counted.accept(1);
    source.emitNext(delivery, Sinks.EmitFailureHandler.FAIL_FAST);
    Object next;
    try {
      next = outcomes.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("idem-test: interrupted while waiting for " + delivery, interrupted);
    }
    if (next == null) {
      throw new IllegalStateException("idem-test: " + delivery + " was not settled within " + timeout
          + " (a handler waiting on a lock its other connection holds?)");
    }
    if (next instanceof Throwable error) {
      throw new IllegalStateException("idem-test: the pipeline failed processing " + delivery, error);
    }
    @SuppressWarnings("unchecked")
    Outcome<T> outcome = (Outcome<T>) next;
    return outcome;
  }

  @Override
  public void close() {
    source.tryEmitComplete();
    pipeline.dispose();
  }
}
