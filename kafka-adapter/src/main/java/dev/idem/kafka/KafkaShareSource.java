package dev.idem.kafka;

import dev.idem.Delivery;
import dev.idem.kafka.internal.ShareEngine;
import java.util.Objects;
import reactor.core.publisher.Flux;

/**
 * A Kafka share group ("queues for Kafka", KIP-932) as a stream of {@link Delivery deliveries}
 * for {@link dev.idem.IdempotentConsumer#process}: the consumers of a share group read the same
 * partitions cooperatively, so a group scales past its partition count, and each record is
 * acknowledged on its own. A share group is at least once (a record whose acquisition lock runs
 * out is delivered again, possibly to another consumer while the first still works on it); Idem
 * makes its effect exactly once: the dedup row decides, as on every source.
 *
 * <pre>{@code
 * KafkaShareSource<Payment> source = KafkaShareSource.create(KafkaSourceOptions.<Payment>builder()
 *     .bootstrapServers("localhost:9092").groupId("payments-queue").topics("payments")
 *     .valueDeserializer(new PaymentDeserializer())
 *     .build(), 2);
 * IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named("payments")
 *     .inbox(inbox).handler(handler).ordering(Ordering.UNORDERED).build();
 * Disposable running = payments.process(source.receive()).subscribe();
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Accepted only after the effect.</b> Each consumer runs with
 *       {@code share.acknowledgement.mode=explicit}. A record is acknowledged {@code ACCEPT} only
 *       after its transaction committed or its dedup row showed it a duplicate, and
 *       {@code REJECT} only after its dead letter is durable on {@code <topic>.DLT} (as on
 *       {@link KafkaSource}: same topic naming, reasons and {@link DeadLetterHeaders}, replay
 *       keeps the id). A dead letter that fails for good releases the record ({@code RELEASE})
 *       and logs an ERROR naming it: the broker delivers it again, up to the group's
 *       {@code group.share.delivery.count.limit} (default 5), after which the broker archives
 *       it.</li>
 *   <li><b>A graceful stop releases.</b> Cancelling the subscription releases every record that
 *       is not settled ({@code RELEASE}: the broker hands it to another consumer at once),
 *       commits the acknowledgements (up to {@link KafkaSourceOptions#closeTimeout()}) and
 *       closes the consumers.</li>
 *   <li><b>Acquisition locks.</b> Explicit acknowledgement lets a consumer poll again only once
 *       every record it holds is acknowledged. With kafka-clients 4.2 and later (and a 4.2
 *       broker), records still in flight at half their acquisition lock (the group's
 *       {@code share.record.lock.duration.ms}, 30 s by default) are renewed ({@code RENEW},
 *       KIP-1222), as often as needed: a slow handler keeps its record, and no other consumer
 *       gets it. The consumer fetches no new records while a renewal is under way, so what is in
 *       flight stays bounded. A renewal the broker refuses (or a broker that cannot renew) ends
 *       in a WARN, and the record is delivered again. With kafka-clients 4.1, which cannot renew, a record
 *       still in flight when its lock runs out is delivered again, perhaps to another consumer
 *       while the first still works on it, and a WARN names the records at 80% of the lock (the
 *       broker's default of 30 s, as 4.1 clients cannot read the group's): set the group's lock
 *       above the slowest handler. Either way the dedup row keeps the effect single (the first
 *       commit wins, a copy finds a duplicate).</li>
 *   <li><b>Delivery count.</b> {@link Delivery#deliveryAttempt()} is the broker's delivery count
 *       of the record, shown to the handler by {@link dev.idem.MessageMetadata#deliveryAttempt()}.</li>
 *   <li><b>No order.</b> A share group keeps no order, so the consumer must be built with
 *       {@link dev.idem.Ordering#UNORDERED}; with {@code BY_KEY} or {@code BY_PARTITION} the
 *       stream fails at its first record with an {@link IllegalArgumentException} saying so
 *       (the records it held are released).</li>
 *   <li><b>Concurrency.</b> Each subscription runs {@code consumers} share consumers in the group,
 *       each on its own thread with {@code max.poll.records} = prefetch / consumers; what is
 *       in flight is bounded by the {@link KafkaSourceOptions#prefetch() prefetch} and the
 *       pipeline's own limits. Several consumers keep records flowing while one waits for the
 *       slowest record of its poll.</li>
 *   <li><b>Broker failures.</b> The client reconnects by itself; a consumer that failed for good
 *       is recreated with backoff (a WARN line per attempt). An invalid consumer configuration
 *       (for example a consumer-group property such as {@code auto.offset.reset}, which share
 *       consumers refuse) ends the stream with an {@link IllegalArgumentException} naming it.</li>
 *   <li><b>Client versions.</b> kafka-clients 4.1 or later (4.2 for lock renewal); creating the
 *       source on an older client fails at once with an {@link IllegalStateException} naming the
 *       version found and the version needed.</li>
 * </ul>
 *
 * <p>Of the {@link KafkaSourceOptions}, the share source reads the bootstrap servers, the group
 * id (the share group's), topics, value deserializer, message id header, extractor and offset
 * fallback, prefetch, close timeout, dead-letter topic naming, reconnect backoff, consumer and
 * producer properties and meter registry (the share consumers' client metrics as
 * {@code kafka.consumer.share.*}, {@value #HELD_RECORDS_METRIC}, {@value #RENEWED_LOCKS_METRIC},
 * {@value #LOST_LOCKS_METRIC}, and the dead-letter producer's meters); the commit,
 * revocation and held-commit settings are the consumer group's and do not apply. Where a new
 * share group starts reading is the group's configuration {@code share.auto.offset.reset}
 * (the broker's default is {@code latest}; set it with {@code kafka-configs.sh --entity-type
 * groups} or the Admin client's {@code incrementalAlterConfigs} before the first consumer
 * joins).
 *
 * @param <T> the payload type
 */
public final class KafkaShareSource<T> implements AutoCloseable {

  /** Default share consumers per subscription: {@value}. */
  public static final int DEFAULT_CONSUMERS = 1;
  /**
   * Gauge of the records a share consumer holds an acquisition lock on, tagged {@code idem.source}
   * with the group id and {@code idem.share.consumer} with the consumer's index: {@value}.
   */
  public static final String HELD_RECORDS_METRIC = "idem.kafka.share.records.held";
  /** Counter of acquisition locks renewed for records still in flight, tagged {@code idem.source}: {@value}. */
  public static final String RENEWED_LOCKS_METRIC = "idem.kafka.share.locks.renewed";
  /**
   * Counter of acquisition locks lost while records were in flight (a renewal the broker refused
   * or that a redelivery overtook), tagged {@code idem.source}: {@value}.
   */
  public static final String LOST_LOCKS_METRIC = "idem.kafka.share.locks.lost";

  private final KafkaSourceOptions<T> options;
  private final int consumers;
  private final ShareEngine<T> engine;

  private KafkaShareSource(KafkaSourceOptions<T> options, int consumers) {
    this.options = Objects.requireNonNull(options, "options");
    this.consumers = consumers;
    this.engine = new ShareEngine<>(options, consumers);
  }

  /**
   * Creates a source with {@value #DEFAULT_CONSUMERS} share consumer per subscription. Nothing
   * connects until {@link #receive()} is subscribed.
   *
   * @param options the validated options; {@link KafkaSourceOptions#groupId()} names the share group
   * @param <T> the payload type
   * @return the source
   * @throws IllegalStateException when kafka-clients is older than 4.1
   */
  public static <T> KafkaShareSource<T> create(KafkaSourceOptions<T> options) {
    return create(options, DEFAULT_CONSUMERS);
  }

  /**
   * Creates a source. Nothing connects until {@link #receive()} is subscribed.
   *
   * @param options the validated options; {@link KafkaSourceOptions#groupId()} names the share group
   * @param consumers share consumers per subscription, at least 1
   * @param <T> the payload type
   * @return the source
   * @throws IllegalStateException when kafka-clients is older than 4.1
   * @throws IllegalArgumentException when {@code consumers < 1} or the options select Reactor Kafka
   */
  public static <T> KafkaShareSource<T> create(KafkaSourceOptions<T> options, int consumers) {
    return new KafkaShareSource<>(options, consumers);
  }

  /**
   * The records of the subscribed topics as deliveries. Subscribing starts the share consumers;
   * cancelling releases what is unsettled, commits the acknowledgements and closes them. The
   * stream does not end by itself and does not error on broker failures: it reconnects.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    return engine.receive();
  }

  /**
   * The options.
   *
   * @return the options
   */
  public KafkaSourceOptions<T> options() {
    return options;
  }

  /**
   * Share consumers per subscription.
   *
   * @return at least 1
   */
  public int consumers() {
    return consumers;
  }

  /**
   * Waits until the {@link #receive()} subscriptions cancelled before have released, committed
   * and closed (each for at most {@link KafkaSourceOptions#closeTimeout()}; not when called on a
   * non-blocking Reactor thread), then closes the dead-letter producer.
   */
  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String toString() {
    return "KafkaShareSource[consumers=" + consumers + ", " + options + "]";
  }
}
