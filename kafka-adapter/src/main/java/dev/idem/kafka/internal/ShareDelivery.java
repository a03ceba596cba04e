package dev.idem.kafka.internal;

import dev.idem.DeadLetter;
import dev.idem.Ordering;
import dev.idem.internal.LogText;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * One record of a share group as a {@link dev.idem.Delivery}. Acknowledging sends {@code ACCEPT};
 * dead-lettering publishes to the dead-letter topic and sends {@code REJECT} only after the broker
 * acknowledged that publish. A dead letter that failed for good (after the publisher's retries of
 * retriable errors) sends {@code RELEASE}: the broker delivers the record again, up to the group's
 * delivery count limit, and the settlement fails with a {@link DeadLetterFailedException}.
 *
 * <p>The broker's delivery count is {@link #deliveryAttempt()}. A share group keeps no order, so
 * {@link #sourceOrdering()} is {@link Ordering#UNORDERED}.
 *
 * @param <T> the payload type
 */
final class ShareDelivery<T> extends RecordDelivery<T> {

  private static final Logger log = LoggerFactory.getLogger(ShareDelivery.class);

  /** Where a settlement goes: the share consumer that holds the record's acquisition lock. */
  interface Settler {
    Mono<Void> settle(ConsumerRecord<byte[], byte[]> record, AcknowledgeType type);
  }

  private final Settler settler;
  private final DeadLetterPublisher publisher;

  ShareDelivery(ConsumerRecord<byte[], byte[]> record, RecordDecoder.Decoded<T> decoded, Settler settler,
      DeadLetterPublisher publisher) {
    super(record, decoded);
    this.settler = settler;
    this.publisher = publisher;
  }

  /** {@link Ordering#UNORDERED}: the broker hands a partition's records to several consumers at once. */
  @Override
  public Ordering sourceOrdering() {
    return Ordering.UNORDERED;
  }

  /** The broker's delivery count of the record (1 for its first delivery to the group). */
  @Override
  public int deliveryAttempt() {
    return ShareClients.deliveryCount(record());
  }

  @Override
  protected Mono<Void> doAck() {
    return settler.settle(record(), AcknowledgeType.ACCEPT);
  }

  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return publisher.publish(record(), decodedId(), deadLetter)
        .onErrorResume(error -> {
          String topic = publisher.deadLetterTopic(record().topic());
          log.error("The dead letter of message '{}' ({}) failed for good on {}: {}; the record is released to the share group,"
              + " which delivers it again (this was delivery {}; past the group's group.share.delivery.count.limit the broker"
              + " archives it without a dead letter)", LogText.id(idForLogs()), coordinates(), topic, LogText.error(error),
              deliveryAttempt());
          return settler.settle(record(), AcknowledgeType.RELEASE)
              .then(
                  Mono.error(new DeadLetterFailedException("the dead letter of " + coordinates() + " failed for good on " + topic
                      + ": " + LogText.error(error), error)));
        })
        .then(Mono.defer(() -> settler.settle(record(), AcknowledgeType.REJECT)));
  }

  @Override
  public String toString() {
    return "ShareDelivery[" + coordinates() + ", delivery " + deliveryAttempt() + ", id=" + LogText.id(idForLogs()) + "]";
  }
}
