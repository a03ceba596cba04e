package dev.idem.rabbit;

import dev.idem.Delivery;
import dev.idem.rabbit.internal.RabbitReceiver;
import java.util.Objects;
import reactor.core.publisher.Flux;

/**
 * A RabbitMQ queue as a stream of {@link Delivery deliveries} for
 * {@link dev.idem.IdempotentConsumer#process}.
 *
 * <pre>{@code
 * RabbitSource<String> source = RabbitSource.create(
 *     RabbitSourceOptions.builder("payments").uri("amqp://guest:guest@localhost:5672").prefetch(32).build(),
 *     PayloadDecoder.utf8());
 * Disposable running = source.receive().transform(payments::process).subscribe();
 * // on shutdown: running.dispose(); source.close();
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Manual acknowledgement.</b> The queue is consumed with manual acks and
 *       {@code basic.qos(prefetch)}: at most {@code prefetch} deliveries are unacknowledged, so
 *       memory is bounded by the prefetch whatever the backlog.</li>
 *   <li><b>Ack after commit.</b> A message is {@code basic.ack}ed only when the pipeline settles
 *       it: after its transaction committed, after it was found a duplicate, or after its dead
 *       letter was confirmed by the broker. Acks run on a dedicated thread, never a database or
 *       event-loop thread, and always on the channel that delivered the message. When that channel
 *       has closed, the ack is dropped (its settlement fails and the pipeline logs it): the broker
 *       redelivers the message and the inbox recognises it as a duplicate.</li>
 *   <li><b>Every message is accounted for.</b> A message without an id or with an id that cannot
 *       be read (see {@link MessageIdExtractor}), or with a body the {@link PayloadDecoder}
 *       rejects, is handed to the pipeline, which dead-letters it; it is never processed and never
 *       silently dropped. Whatever the user's extractor, decoder or ordering-key rule throws,
 *       {@link Error}s included, makes only that message a dead letter: the stream and the channel
 *       go on.</li>
 *   <li><b>Recovery.</b> A lost channel or connection (the broker closed it, {@code consumer_timeout},
 *       a restart, the queue deleted) ends in a new connection, channel and consumer, after an
 *       exponential backoff ({@link RabbitSourceOptions#recoveryBackoff()}); the returned
 *       {@code Flux} does not complete or fail for it. Unacknowledged messages come back from the
 *       broker and are processed once. The client's own automatic recovery is switched off.</li>
 *   <li><b>Graceful stop.</b> With {@link dev.idem.GracefulShutdown}, the acknowledgements of the
 *       messages that finish during the grace period are sent on the still-open channel before
 *       the stream cancels this source (which closes the channel); the messages received but not
 *       started are requeued by the broker when it closes. Close the source after the stop.</li>
 *   <li><b>Metadata.</b> {@link Delivery#brokerCoordinates()} gives the exchange, routing key,
 *       queue, redelivered flag and delivery tag under the keys of {@link dev.idem.MessageMetadata}.</li>
 *   <li><b>Attempts.</b> {@link Delivery#deliveryAttempt()} comes from the {@code redelivered}
 *       flag and, on quorum queues, the {@code x-delivery-count} header.</li>
 *   <li><b>Dead letters</b> per {@link RabbitSourceOptions#deadLetterMode()}; by default a confirmed
 *       publish with the reason headers of {@link RabbitHeaders}, at least once: at most one extra
 *       copy per redelivery (see {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS}).</li>
 *   <li><b>Bounded log lines.</b> Ids in the adapter's log lines and error messages are cut to 255
 *       characters, error texts to 1,000 (then {@code ...}); URIs are shown with the password
 *       masked.</li>
 * </ul>
 *
 * <p>One source owns one connection; {@link #receive()} is meant to be subscribed once at a time.
 * Thread-safe.
 *
 * @param <T> the payload type
 */
public final class RabbitSource<T> implements AutoCloseable {

  private final RabbitSourceOptions options;
  private final RabbitReceiver<T> receiver;

  private RabbitSource(RabbitSourceOptions options, PayloadDecoder<T> decoder) {
    this.options = Objects.requireNonNull(options, "options");
    this.receiver = new RabbitReceiver<>(options, Objects.requireNonNull(decoder, "decoder"));
  }

  /**
   * Creates a source; nothing connects until {@link #receive()} is subscribed.
   *
   * @param options the settings
   * @param decoder turns bodies into payloads
   * @param <T> the payload type
   * @return the source; {@link #close()} it when done
   */
  public static <T> RabbitSource<T> create(RabbitSourceOptions options, PayloadDecoder<T> decoder) {
    return new RabbitSource<>(options, decoder);
  }

  /**
   * The queue's deliveries. Subscribing opens the connection and registers the consumer;
   * cancelling closes the channel (unacknowledged messages go back to the queue). Never completes
   * or errors because of a lost connection; completes after {@link #close()}.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    return receiver.receive();
  }

  /**
   * The settings.
   *
   * @return the options
   */
  public RabbitSourceOptions options() {
    return options;
  }

  /**
   * Deliveries received on the current channel and not yet settled; never more than the prefetch
   * and never negative. Each delivery counts once, from its arrival until its ack or reject is sent
   * to the broker, however often its settlement is attempted; a closed channel counts 0 (the broker
   * took its deliveries back). Cheap; suitable for a gauge.
   *
   * @return the count
   */
  public int unsettled() {
    return receiver.unsettled();
  }

  /**
   * The most deliveries that were ever unsettled at once on one channel.
   *
   * @return the high-water mark, at most the prefetch
   */
  public int peakUnsettled() {
    return receiver.peakUnsettled();
  }

  /**
   * The {@code basic.ack} frames this source sent. Acks are coalesced: an ack waits briefly
   * (at most 200 ms, and at most half the prefetch of them per channel) for the deliveries below it
   * on its channel, so that one {@code basic.ack} with {@code multiple} set carries them all; the
   * ratio to {@link #acknowledged()} shows how well that works for a workload.
   *
   * @return the frames sent
   */
  public long ackFrames() {
    return receiver.ackFrames();
  }

  /**
   * The deliveries this source acknowledged (by the frames of {@link #ackFrames()}).
   *
   * @return the count
   */
  public long acknowledged() {
    return receiver.acknowledged();
  }

  /**
   * How many times a consumer was registered: 1 after the first subscription, one more per
   * recovery.
   *
   * @return the number of consumer sessions
   */
  public int sessions() {
    return receiver.sessions();
  }

  /**
   * The number of ready messages in a queue (a passive declare on a short-lived channel).
   *
   * @param queue the queue, e.g. this source's queue or its dead-letter queue
   * @return the count; errors when the queue does not exist or the broker is unreachable
   */
  public reactor.core.publisher.Mono<Long> readyCount(String queue) {
    return receiver.readyCount(Objects.requireNonNull(queue, "queue"));
  }

  /**
   * Closes the connection; unacknowledged messages go back to the queue, the {@link #receive()}
   * stream completes, later settlements fail and leave their messages to redelivery.
   */
  @Override
  public void close() {
    receiver.close();
  }

  @Override
  public String toString() {
    return "RabbitSource[" + options + "]";
  }
}
