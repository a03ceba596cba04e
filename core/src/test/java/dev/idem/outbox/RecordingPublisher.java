package dev.idem.outbox;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Predicate;
import reactor.core.publisher.Mono;

/**
 * A destination in memory for tests of the relay's own behaviour: it records every confirmed
 * message in order, counts confirmations per id, tracks how many messages of one key are in
 * flight at once, and fails as a test tells it to.
 */
final class RecordingPublisher implements OutboxPublisher {

  final List<OutboxMessage> confirmed = new CopyOnWriteArrayList<>();
  final Map<String, AtomicInteger> confirmationsById = new ConcurrentHashMap<>();
  final Map<String, AtomicInteger> attemptsById = new ConcurrentHashMap<>();
  final AtomicInteger failures = new AtomicInteger();
  private final Map<String, AtomicInteger> inFlightByKey = new ConcurrentHashMap<>();
  final AtomicInteger mostInFlightForOneKey = new AtomicInteger();
  private volatile Function<OutboxMessage, Throwable> failure = m -> null;
  private volatile Duration latency = Duration.ofMillis(1);
  private volatile Predicate<OutboxMessage> hang = m -> false;

  /** Fails a message's attempt when the function returns an error for it. */
  RecordingPublisher failWhen(Function<OutboxMessage, Throwable> failure) {
    this.failure = failure;
    return this;
  }

  /** Never answers a message's attempt (no confirmation, no error) when the predicate holds for it. */
  RecordingPublisher hangWhen(Predicate<OutboxMessage> hang) {
    this.hang = hang;
    return this;
  }

  RecordingPublisher latency(Duration latency) {
    this.latency = latency;
    return this;
  }

  @Override
  public Mono<Void> publish(OutboxMessage message) {
    return Mono.defer(() -> {
      attemptsById.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
      AtomicInteger inFlight = message.key() == null
          ? new AtomicInteger()
          : inFlightByKey.computeIfAbsent(message.key(), k -> new AtomicInteger());
      mostInFlightForOneKey.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
      if (hang.test(message)) {
        return Mono.<Void>never().doFinally(signal -> inFlight.decrementAndGet());
      }
      return Mono.delay(latency)
          .then(Mono.defer(() -> {
            Throwable error = failure.apply(message);
            if (error != null) {
              failures.incrementAndGet();
              return Mono.error(error);
            }
            confirmed.add(message);
            confirmationsById.computeIfAbsent(message.id(), id -> new AtomicInteger()).incrementAndGet();
            return Mono.<Void>empty();
          }))
          .doFinally(signal -> inFlight.decrementAndGet());
    });
  }

  int attempts(String id) {
    AtomicInteger n = attemptsById.get(id);
    return n == null ? 0 : n.get();
  }
}
