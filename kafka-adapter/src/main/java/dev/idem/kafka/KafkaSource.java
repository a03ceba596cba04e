package dev.idem.kafka;

import dev.idem.Delivery;
import dev.idem.kafka.internal.SourceEngine;
import java.util.Objects;
import reactor.core.publisher.Flux;

/**
 * A Kafka topic subscription as a stream of {@link Delivery deliveries} for
 * {@link dev.idem.IdempotentConsumer#process}, on kafka-clients 3.9.x or 4.x ({@link KafkaEngine#NATIVE},
 * the default) or on Reactor Kafka ({@link KafkaEngine#REACTOR_KAFKA}, kafka-clients 3.x only).
 *
 * <pre>{@code
 * KafkaSource<Payment> source = KafkaSource.create(KafkaSourceOptions.<Payment>builder()
 *     .bootstrapServers("localhost:9092").groupId("payments").topics("payments")
 *     .valueDeserializer(new PaymentDeserializer())
 *     .build());
 * Disposable running = payments.process(source.receive()).subscribe();
 * }</pre>
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Ordered commits.</b> An offset is committed only when the record at it and every
 *       earlier record of its partition is settled (processed, duplicate or dead-lettered),
 *       whatever order they finish in. The watermark is committed every
 *       {@link KafkaSourceOptions#commitInterval()} (or after
 *       {@link KafkaSourceOptions#commitBatchSize()} settlements), before a revocation completes
 *       and before the consumer closes.</li>
 *   <li><b>Poison pills do not stop the stream.</b> Values are decoded here, not by the Kafka
 *       client; a value the deserializer rejects, whatever it throws (JVM errors such as
 *       {@code AssertionError} or {@code OutOfMemoryError} included), becomes a delivery with
 *       {@link Delivery#decodingFailure()} set, which the pipeline dead-letters.</li>
 *   <li><b>Dead letters are durable first.</b> A dead-lettered record goes to
 *       {@code <topic>.DLT} (configurable) with its key, value bytes, message id and the
 *       {@link DeadLetterHeaders}, by an idempotent {@code acks=all} producer; its offset is
 *       settled only after the broker acknowledged that record. Create the dead-letter topics
 *       beforehand (or let the broker auto-create them). A publish that fails with a retriable
 *       Kafka error (topic being created, leader moving) is retried with backoff and a WARN per
 *       retry. One that fails for good (a record too large for the topic's
 *       {@code max.message.bytes}, a producer not authorised to write it) is not retried: the
 *       settlement fails at once, the failure is logged at ERROR with the topic-partition,
 *       offset, message id and error, and the record stays unsettled. Its partition then commits
 *       nothing from that offset on, so nothing is lost: the record is redelivered after a
 *       restart or a rebalance and dead-lettered once the topic accepts it. Records after it are
 *       still processed (each once) until {@link KafkaSourceOptions#maxDeferredCommits()} of them
 *       wait and the consumer pauses. For as long as the commits are held, an ERROR line naming
 *       the topic-partition, offset, message id and how long is logged every
 *       {@link KafkaSourceOptions#heldCommitsLogInterval()} (default 60 s); with a meter
 *       registry, {@value #FAILED_DEAD_LETTERS_METRIC} counts such records and
 *       {@value #HELD_PARTITIONS_METRIC} gauges the partitions they hold. The detail and
 *       error-message headers are cut at 1,000 characters so that a huge error text cannot make
 *       the dead letter too large; log lines cut error texts at 1,000 characters and message ids
 *       at 255.</li>
 *   <li><b>Transactions.</b> The consumer reads with {@code isolation.level=read_committed} by
 *       default, so records of aborted producer transactions are never applied.</li>
 *   <li><b>Backpressure.</b> When the pipeline has no demand, or too many settled records wait
 *       behind an unsettled one, the consumer pauses its partitions and keeps polling, so a slow
 *       handler never exceeds {@code max.poll.interval.ms}.</li>
 *   <li><b>Rebalance.</b> Revoked partitions get {@link KafkaSourceOptions#revocationGracePeriod()}
 *       to settle and commit; later settlements of their records commit nothing, and their
 *       redelivery to the new owner is absorbed by the dedup table.</li>
 *   <li><b>Broker failures.</b> The Kafka client reconnects by itself; a consumer that failed for
 *       good is recreated with backoff (a WARN line per attempt) and resumes from the committed
 *       offsets. Nothing is committed that was not settled. An invalid consumer configuration ends
 *       the stream with an {@link IllegalArgumentException} naming it.</li>
 *   <li><b>Metadata.</b> {@link Delivery#brokerCoordinates()} gives the topic, partition and
 *       offset under the keys of {@link dev.idem.MessageMetadata}; {@link Delivery#key()} is the
 *       record key as UTF-8 (none for a keyless record).</li>
 *   <li><b>Ids and ordering.</b> {@link Delivery#id()} comes from the id header (default
 *       {@value KafkaSourceOptions#DEFAULT_MESSAGE_ID_HEADER}) or the configured extractor,
 *       else {@code topic/partition/offset}, which dedups broker redeliveries but not producer
 *       duplicates. An id header that is not UTF-8, or that appears several times with different
 *       values, is an invalid id: {@link Delivery#id()} throws and the record is dead-lettered as
 *       {@link dev.idem.DeadLetterReason#INVALID_ID} (see
 *       {@link KafkaSourceOptions.Builder#messageIdHeader}). {@link Delivery#partition()} is
 *       {@code topic-partition}; {@link Delivery#orderingKey()} is the record key as UTF-8, or
 *       the partition for keyless records, so {@link dev.idem.Ordering#BY_KEY} keeps them in
 *       partition order. Keys that are not UTF-8 are decoded leniently, so two such keys can
 *       share an ordering key: they are then serialized together, and the order of each key is
 *       kept.</li>
 * </ul>
 *
 * <p>Each subscription to {@link #receive()} creates its own Kafka consumer in the group. Close
 * the source to release the dead-letter producer.
 *
 * @param <T> the payload type
 */
public final class KafkaSource<T> implements AutoCloseable {

  /**
   * Counter of records whose dead letter failed for good (each holds its partition's commits),
   * tagged {@code idem.source} with the group id: {@value}.
   */
  public static final String FAILED_DEAD_LETTERS_METRIC = "idem.kafka.dead.letters.failed";
  /**
   * Gauge of the partitions whose commits such records hold, tagged {@code idem.source} with the
   * group id: {@value}.
   */
  public static final String HELD_PARTITIONS_METRIC = "idem.kafka.partitions.held";

  private final KafkaSourceOptions<T> options;
  private final SourceEngine<T> engine;

  private KafkaSource(KafkaSourceOptions<T> options) {
    this.options = Objects.requireNonNull(options, "options");
    this.engine = new SourceEngine<>(options);
  }

  /**
   * Creates a source. Nothing connects until {@link #receive()} is subscribed.
   *
   * @param options the validated options
   * @param <T> the payload type
   * @return the source
   */
  public static <T> KafkaSource<T> create(KafkaSourceOptions<T> options) {
    return new KafkaSource<>(options);
  }

  /**
   * The records of the subscribed topics as deliveries. Subscribing joins the consumer group;
   * cancelling first commits the acknowledged offsets (and waits for the broker's answer, up to
   * {@link KafkaSourceOptions#closeTimeout()}), then closes the consumer, which leaves the group.
   * So after a {@link dev.idem.GracefulShutdown graceful stop} the offsets of the messages
   * completed during the grace period are committed, not redelivered. The stream does not end by
   * itself and does not error on broker failures: it reconnects.
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
   * Waits until the {@link #receive()} subscriptions cancelled before have committed their
   * acknowledged offsets (each for at most {@link KafkaSourceOptions#closeTimeout()}; not when
   * called on a non-blocking Reactor thread), then closes the dead-letter producer. Cancel the
   * subscriptions first (for example by {@link dev.idem.GracefulShutdown#stop}).
   */
  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String toString() {
    return "KafkaSource[" + options + "]";
  }
}
