package dev.idem;

/**
 * The names of the Micrometer observations an {@link IdempotentConsumer} records when it is given
 * an {@link io.micrometer.observation.ObservationRegistry} (see
 * {@link IdempotentConsumer.Builder#observationRegistry}); without one it records none.
 *
 * <ul>
 *   <li>{@value #MESSAGE}: one per message, from the start of its processing to its settlement.
 *       Its context is a {@link io.micrometer.observation.transport.ReceiverContext} whose carrier
 *       is the {@link Delivery} and whose getter reads {@link Delivery#headers()}, so that a
 *       tracing bridge continues the producer's trace from the W3C {@code traceparent} and
 *       {@code tracestate} headers. Contextual name {@code "<consumer> process"}; low-cardinality
 *       keys {@value #CONSUMER} and {@value #OUTCOME}; high-cardinality key {@value #MESSAGE_ID}.</li>
 *   <li>{@value #TRANSACTION}: a child, one per transaction attempt, current while the handler
 *       runs (in the Reactor context under {@code ObservationThreadLocalAccessor.KEY}, and in
 *       scope on the thread that calls the handler). High-cardinality key {@value #ATTEMPT}.</li>
 *   <li>{@value #SETTLE}: a child around the acknowledgement or dead letter.</li>
 * </ul>
 *
 * <p>Batch mode ({@code maxBatchSize > 1}): each message still gets its own {@value #MESSAGE}
 * observation, current while its {@link Handler} runs; the shared transaction and the
 * acknowledgements are recorded as events ({@value #TRANSACTION}, {@value #SETTLE}) on it rather
 * than as child observations.
 */
public final class IdemObservations {

  /** The per-message observation: {@value}. */
  public static final String MESSAGE = "idem.message";
  /** The per-attempt transaction observation: {@value}. */
  public static final String TRANSACTION = "idem.transaction";
  /** The settlement observation: {@value}. */
  public static final String SETTLE = "idem.settle";
  /** Low-cardinality key: the consumer name: {@value}. */
  public static final String CONSUMER = "idem.consumer";
  /**
   * Low-cardinality key: the {@link Outcome.Status} name, or {@code NONE} when the message ended
   * without an outcome (cancelled, stopped, or its settlement failed): {@value}.
   */
  public static final String OUTCOME = "idem.outcome";
  /** High-cardinality key: the message id: {@value}. */
  public static final String MESSAGE_ID = "idem.message.id";
  /** High-cardinality key: the attempt number, from 1: {@value}. */
  public static final String ATTEMPT = "idem.attempt";

  private IdemObservations() {}
}
