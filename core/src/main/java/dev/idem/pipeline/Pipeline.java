package dev.idem.pipeline;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.Outcome;
import dev.idem.internal.StopControl;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;

/**
 * One consumer's pipeline, wired from its {@link ConsumerSettings}: {@link Dispatch} takes the
 * deliveries to its lanes, whose batches go to the {@link BatchPath} (or, with
 * {@code maxBatchSize(1)}, each message to the {@link MessagePath}); both validate, run the
 * transaction, decide on retries and settle. Built once per consumer by
 * {@code IdempotentConsumer}; not API.
 *
 * @param <T> the payload type
 */
public final class Pipeline<T> {

  /**
   * The category of the pipeline's log lines: {@code dev.idem.IdempotentConsumer}, the class a
   * user configures logging for.
   */
  static final String LOG = "dev.idem.IdempotentConsumer";

  private final ConsumerSettings<T> settings;
  private final Dispatch<T> dispatch;
  private final MessagePath<T> messages;
  private final BatchPath<T> batches;

  /**
   * Wires the stages.
   *
   * @param settings the consumer's settings, checked by its builder
   */
  public Pipeline(ConsumerSettings<T> settings) {
    this.settings = settings;
    this.dispatch = new Dispatch<>(settings.maxBatchSize(), settings.batchMaxWait(), settings.concurrency(), settings.prefetch(),
        settings.ordering(), settings.metrics());
    DeliveryValidation validation = new DeliveryValidation(settings);
    FailureKinds kinds = new FailureKinds(settings);
    Settlement settlement = new Settlement(settings);
    DeadlockRecovery deadlocks = new DeadlockRecovery(settings);
    BatchTransaction<T> transaction = new BatchTransaction<>(settings, new EffectRunner<>(settings));
    this.messages = new MessagePath<>(settings, validation, transaction, kinds, settlement, deadlocks);
    this.batches = new BatchPath<>(settings, validation, transaction, messages, kinds, settlement, deadlocks);
  }

  /**
   * The outcomes of {@code source}; see {@code IdempotentConsumer.process(Publisher)}.
   *
   * @param source the deliveries
   * @return one outcome per settled message
   */
  public Flux<Outcome<T>> process(Publisher<? extends Delivery<T>> source) {
    ConsumerMetrics metrics = settings.metrics();
    Flux<Delivery<T>> received = Flux.<Delivery<T>>from(source).doOnNext(metrics::received);
    Flux<Outcome<T>> outcomes = dispatch.outcomes(received, messages::handle, batches::process);
    return outcomes.doOnDiscard(Delivery.class, metrics::abandoned)
        .doOnSubscribe(s -> settings.inbox().checkReplication().subscribe());
  }

  /**
   * The outcomes of {@code source} until {@code control} stops it gracefully; see
   * {@code IdempotentConsumer.process(Publisher, GracefulShutdown)}.
   *
   * @param source the deliveries
   * @param control the stop this stream is attached to
   * @return one outcome per settled message; completes after a stop
   */
  public Flux<Outcome<T>> process(Publisher<? extends Delivery<T>> source, StopControl control) {
    ConsumerMetrics metrics = settings.metrics();
    // As process(source), with the stop's gate in front of the source and around each start.
    Flux<Delivery<T>> received = control.<Delivery<T>>gate(source).doOnNext(metrics::received);
    Flux<Outcome<T>> outcomes = dispatch.outcomes(received, d -> control.run(d, messages.handle(d)),
        (batch, lane) -> control.runBatch(batch, lane, tracked -> batches.process(batch, tracked)));
    return control.untilStopped(outcomes.doOnDiscard(Delivery.class, metrics::abandoned))
        .doOnSubscribe(s -> settings.inbox().checkReplication().subscribe());
  }
}
