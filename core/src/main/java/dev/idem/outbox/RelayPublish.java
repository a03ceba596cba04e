package dev.idem.outbox;

import dev.idem.internal.JvmErrors;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;
import reactor.core.publisher.Mono;

/**
 * The publish step of an {@link OutboxRelay}'s round: hands a claimed batch to the user's
 * {@link OutboxPublisher} and reports, for each row, whether its destination confirmed it within
 * {@code publishTimeout}. It never marks anything; the mark step does, in the round's transaction.
 */
final class RelayPublish {

  private final OutboxPublisher publisher;
  private final Duration publishTimeout;

  RelayPublish(OutboxPublisher publisher, Duration publishTimeout) {
    this.publisher = publisher;
    this.publishTimeout = publishTimeout;
  }

  /**
   * Publishes a batch through the user's publisher, guarded: whatever it throws or signals
   * (JVM errors excepted) fails the messages concerned.
   *
   * @return the failed messages' errors by seq; the others were confirmed
   */
  Mono<Map<Long, Throwable>> publish(List<OutboxMessage> batch) {
    Map<Long, Throwable> errors = new ConcurrentHashMap<>();
    Set<Long> confirmed = ConcurrentHashMap.newKeySet();
    Throwable[] batchError = new Throwable[1];
    return guarded(List.copyOf(batch), result -> {
      if (result == null || result.message() == null) {
        return;
      }
      if (result.isSent()) {
        confirmed.add(result.message().seq());
      } else {
        errors.put(result.message().seq(), result.error());
      }
    })
        .timeout(publishTimeout)
        .onErrorResume(error -> !JvmErrors.isFatal(error), error -> {
          batchError[0] = error instanceof TimeoutException
              ? new TimeoutException("no confirmation within the publish timeout of " + publishTimeout)
              : error;
          return Mono.empty();
        })
        .then(Mono.fromSupplier(() -> {
          Map<Long, Throwable> failed = new HashMap<>();
          for (OutboxMessage message : batch) {
            Throwable error = errors.get(message.seq());
            if (error == null && !confirmed.contains(message.seq())) {
              error = batchError[0] != null
                  ? batchError[0]
                  : new IllegalStateException("the publisher reported no result for this message");
            }
            if (error != null) {
              failed.put(message.seq(), error);
            }
          }
          return failed;
        }));
  }

  /**
   * Subscribes the user's publisher with a plain subscriber inside try/catch: Reactor's operators
   * rethrow JVM errors up the calling stack instead of signalling them, and this is where such a
   * throw from the publisher's own code lands. A JVM error in a result is signalled as well.
   */
  private Mono<Void> guarded(List<OutboxMessage> batch, Consumer<OutboxPublisher.Result> onResult) {
    return Mono.create(sink -> {
      try {
        Objects.requireNonNull(publisher.publishAll(batch), "publishAll returned null").subscribe(new Subscriber<>() {
          @Override
          public void onSubscribe(Subscription subscription) {
            sink.onCancel(subscription::cancel);
            subscription.request(Long.MAX_VALUE);
          }

          @Override
          public void onNext(OutboxPublisher.Result result) {
            if (result != null && result.error() != null && JvmErrors.isFatal(result.error())) {
              sink.error(new FatalPublisherError(result.error()));
              return;
            }
            onResult.accept(result);
          }

          @Override
          public void onError(Throwable error) {
            sink.error(JvmErrors.isFatal(error) ? new FatalPublisherError(error) : error);
          }

          @Override
          public void onComplete() {
            sink.success();
          }
        });
      } catch (Throwable e) {
        sink.error(JvmErrors.isFatal(e) ? new FatalPublisherError(e) : e);
      }
    });
  }

  /**
   * Carries a JVM error of the publisher through the round's transaction as a plain exception:
   * Reactor rethrows JVM errors up the calling thread (for example from {@code then(Mono.error(e))})
   * instead of signalling them. Unwrapped where the relay's stream ends.
   */
  static final class FatalPublisherError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    FatalPublisherError(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }
}
