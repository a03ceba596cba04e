package dev.idem.internal;

import dev.idem.Delivery;
import dev.idem.IdemObservations;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.transport.ReceiverContext;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Supplier;
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
    return Mono.defer(() -> {
      Observation observation = start(delivery);
      String[] outcome = {NONE};
      return work.contextWrite(context -> context.put(CURRENT, observation))
          .doOnNext(result -> outcome[0] = status.apply(result))
          .doOnError(observation::error)
          .doFinally(signal -> stop(observation, outcome[0], signal));
    });
  }

  /**
   * Starts a {@value IdemObservations#MESSAGE} observation, for a message of a batch.
   *
   * @param delivery the message
   * @return the started observation, or {@code null} when off
   */
  public Observation startMessage(Delivery<?> delivery) {
    return off ? null : start(delivery);
  }

  /**
   * Stops a message observation of a batch.
   *
   * @param observation the observation, or {@code null}
   * @param status the outcome's status name, or {@code null} for none
   * @param signal how the processing ended
   */
  public void stopMessage(Observation observation, String status, SignalType signal) {
    if (observation != null) {
      stop(observation, status == null ? NONE : status, signal);
    }
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
   * Makes an observation current for a batch's message: in the Reactor context of {@code work}.
   *
   * @param observation the message's observation, or {@code null}
   * @param work the work
   * @param <R> its value type
   * @return the work
   */
  public static <R> Mono<R> within(Observation observation, Mono<R> work) {
    return observation == null ? work : work.contextWrite(c -> c.put(CURRENT, observation));
  }

  /**
   * Records an event on each observation of a batch.
   *
   * @param observations the observations, entries may be {@code null}
   * @param event the event name
   */
  public static void event(Iterable<Observation> observations, String event) {
    for (Observation observation : observations) {
      if (observation != null) {
        observation.event(Observation.Event.of(event));
      }
    }
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

  private static String header(Delivery<?> carrier, String key) {
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
      return id == null ? "" : LogText.cutId(id);
    } catch (RuntimeException e) {
      return "<invalid>";
    }
  }
}
