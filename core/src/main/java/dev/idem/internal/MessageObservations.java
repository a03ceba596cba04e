package dev.idem.internal;

import dev.idem.Delivery;
import dev.idem.IdemObservations;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.ReceiverContext;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.util.context.ContextView;

/**
 * The observations of one consumer (see {@link IdemObservations}). With the no-op registry every
 * method returns its argument untouched: no observation, context or allocation per message.
 */
public final class MessageObservations {

  /**
   * The Reactor context key of the current observation; equal to Micrometer's
   * {@code ObservationThreadLocalAccessor.KEY} (a test checks it), spelled out so that core does
   * not need the context-propagation library at compile time.
   */
  public static final String CURRENT = "micrometer.observation";

  private static final String NONE = "NONE";
  /** The context key of a batch's message observations. */
  private static final String BATCH = MessageObservations.class.getName() + ".batch";

  private final ObservationRegistry registry;
  private final String consumer;
  private final boolean off;

  /**
   * @param registry the registry; {@link ObservationRegistry#NOOP} records nothing
   * @param consumer the consumer name
   */
  public MessageObservations(ObservationRegistry registry, String consumer) {
    this.registry = registry;
    this.consumer = consumer;
    this.off = registry.isNoop();
  }

  /**
   * Tells whether observations are recorded.
   *
   * @return {@code false} with the no-op registry
   */
  public boolean isOn() {
    return !off;
  }

  /**
   * Observes one message's processing as {@value IdemObservations#MESSAGE}.
   *
   * @param delivery the message
   * @param work its processing, emitting at most one outcome
   * @param status the outcome's status name
   * @param <R> the outcome type
   * @return the observed work
   */
  public <R> Mono<R> message(Delivery<?> delivery, Mono<R> work, Function<R, String> status) {
    if (off) {
      return work;
    }
    return Mono.deferContextual(subscriber -> {
      Observation ofBatch = ofBatch(subscriber, delivery);
      if (ofBatch != null) {
        // A message of an observed batch that is processed alone (a split batch): it has its observation.
        return work.contextWrite(c -> c.put(CURRENT, ofBatch));
      }
      Observation observation = start(delivery);
      String[] outcome = {NONE};
      return work.contextWrite(context -> context.put(CURRENT, observation))
          .doOnNext(result -> outcome[0] = status.apply(result))
          .doOnError(observation::error)
          .doFinally(signal -> stop(observation, outcome[0], signal));
    });
  }

  /**
   * Observes a batch: one {@value IdemObservations#MESSAGE} observation per message, started now
   * and stopped with its outcome (after a {@value IdemObservations#SETTLE} event), or without
   * one when the batch ends first. Each message's handler runs with its observation current
   * ({@link #asCurrent}); its transaction is marked by a {@value IdemObservations#TRANSACTION}
   * event.
   *
   * @param batch the messages
   * @param work the batch's processing
   * @param deliveryOf the message of an outcome
   * @param status the outcome's status name
   * @param <R> the outcome type
   * @return the observed processing
   */
  public <R> Flux<R> batch(List<? extends Delivery<?>> batch, Flux<R> work, Function<R, Delivery<?>> deliveryOf,
      Function<R, String> status) {
    if (off) {
      return work;
    }
    return Flux.defer(() -> {
      Map<Delivery<?>, Observation> observations = Collections.synchronizedMap(new IdentityHashMap<>());
      for (Delivery<?> delivery : batch) {
        observations.putIfAbsent(delivery, start(delivery));
      }
      return work
          .doOnNext(result -> {
            Observation observation = observations.remove(deliveryOf.apply(result));
            if (observation != null) {
              observation.event(Observation.Event.of(IdemObservations.SETTLE));
              stop(observation, status.apply(result), SignalType.ON_COMPLETE);
            }
          })
          .doFinally(signal -> {
            List<Observation> left;
            synchronized (observations) {
              left = new ArrayList<>(observations.values());
              observations.clear();
            }
            left.forEach(observation -> stop(observation, NONE, signal));
          })
          .contextWrite(c -> c.put(BATCH, observations));
    });
  }

  /**
   * Runs a batch's message step with the message's observation current, marking its transaction.
   *
   * @param delivery the message
   * @param work the step (its handler)
   * @param <R> its value type
   * @return the step
   */
  public <R> Mono<R> asCurrent(Delivery<?> delivery, Mono<R> work) {
    if (off) {
      return work;
    }
    return Mono.deferContextual(context -> {
      Observation observation = ofBatch(context, delivery);
      if (observation == null) {
        return work;
      }
      observation.event(Observation.Event.of(IdemObservations.TRANSACTION));
      return work.contextWrite(c -> c.put(CURRENT, observation));
    });
  }

  private static @Nullable Observation ofBatch(ContextView context, Delivery<?> delivery) {
    Object batch = context.getOrDefault(BATCH, null);
    return batch instanceof Map<?, ?> observations && observations.get(delivery) instanceof Observation o ? o : null;
  }

  private Observation start(Delivery<?> delivery) {
    ReceiverContext<Delivery<?>> context = new ReceiverContext<>(MessageObservations::header);
    context.setCarrier(delivery);
    return Observation.createNotStarted(IdemObservations.MESSAGE, () -> context, registry)
        .contextualName(consumer + " process")
        .lowCardinalityKeyValue(IdemObservations.CONSUMER, consumer)
        .highCardinalityKeyValue(IdemObservations.MESSAGE_ID, idOf(delivery))
        .start();
  }

  private static void stop(Observation observation, String outcome, SignalType signal) {
    observation.lowCardinalityKeyValue(IdemObservations.OUTCOME, outcome);
    if (signal == SignalType.CANCEL) {
      observation.event(Observation.Event.of("idem.cancelled", "processing cancelled; the message stays unacknowledged"));
    }
    observation.stop();
  }

  /**
   * Observes a step of the current message as a child observation ({@value IdemObservations#TRANSACTION}
   * or {@value IdemObservations#SETTLE}); without a current observation in the subscriber's
   * context, the step is not observed.
   *
   * @param name the child's name
   * @param attempt the attempt number, or 0 for none
   * @param work the step
   * @param <R> its value type
   * @return the observed step
   */
  public <R> Mono<R> child(String name, int attempt, Mono<R> work) {
    if (off) {
      return work;
    }
    return Mono.deferContextual(context -> {
      Object parent = context.getOrDefault(CURRENT, null);
      if (!(parent instanceof Observation parentObservation)) {
        return work;
      }
      Observation child = Observation.createNotStarted(name, registry)
          .parentObservation(parentObservation)
          .contextualName(consumer + " " + name.substring(name.indexOf('.') + 1))
          .lowCardinalityKeyValue(IdemObservations.CONSUMER, consumer);
      if (attempt > 0) {
        child.highCardinalityKeyValue(IdemObservations.ATTEMPT, Integer.toString(attempt));
      }
      child.start();
      return work.contextWrite(c -> c.put(CURRENT, child))
          .doOnError(child::error)
          .doFinally(signal -> child.stop());
    });
  }

  /**
   * Calls the user's handler with the current observation of {@code context} in scope, so that
   * thread-local tracing (log correlation, blocking clients) sees it while the handler assembles
   * its publisher.
   *
   * @param context the subscriber's context
   * @param call the handler call
   * @param <P> what it returns
   * @return what the call returned
   */
  public static <P> P inScope(ContextView context, Supplier<P> call) {
    Object current = context.getOrDefault(CURRENT, null);
    if (!(current instanceof Observation observation)) {
      return call.get();
    }
    Observation.Scope scope = observation.openScope();
    try {
      return call.get();
    } finally {
      scope.close();
    }
  }

  private static @Nullable String header(Delivery<?> carrier, String key) {
    try {
      Map<String, String> headers = carrier.headers();
      return headers == null ? null : headers.get(key);
    } catch (RuntimeException e) {
      return null;
    }
  }

  private static String idOf(Delivery<?> delivery) {
    try {
      String id = delivery.id();
      return id == null ? "" : Objects.requireNonNull(LogText.cutId(id));
    } catch (RuntimeException e) {
      return "<invalid>";
    }
  }
}
