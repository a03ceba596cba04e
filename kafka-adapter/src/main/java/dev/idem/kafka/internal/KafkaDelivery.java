package dev.idem.kafka.internal;

import dev.idem.DeadLetter;
import dev.idem.internal.LogText;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import reactor.core.publisher.Mono;

/**
 * One Kafka record of a consumer group as a {@link dev.idem.Delivery}. Acknowledging marks its
 * offset settled in its engine's out-of-order commit tracker: the offset is committed once it and
 * every earlier offset of its partition are settled. Dead-lettering publishes to the dead-letter
 * topic and settles the offset only after the broker acknowledged that publish; a publish that
 * failed for good (after the publisher's retries of retriable errors) fails the settlement with a
 * {@link DeadLetterFailedException}, leaves the offset unsettled and holds its partition's
 * commits, which {@link CommitHolds} reports.
 *
 * @param <T> the payload type
 */
public final class KafkaDelivery<T> extends RecordDelivery<T> {

  private final Runnable settle;
  private final DeadLetterPublisher publisher;
  private final CommitHolds holds;

  KafkaDelivery(ConsumerRecord<byte[], byte[]> record, Runnable settle, RecordDecoder.Decoded<T> decoded,
      DeadLetterPublisher publisher,
      CommitHolds holds) {
    super(record, decoded);
    this.settle = settle;
    this.publisher = publisher;
    this.holds = holds;
  }

  @Override
  protected Mono<Void> doAck() {
    return Mono.fromRunnable(settle);
  }

  /** Marking the offset settled is a quick step under the partition tracker's lock: the pipeline does it in place. */
  @Override
  protected boolean acksInPlace() {
    return true;
  }

  @Override
  protected void doAckInPlace() {
    settle.run();
  }

  /**
   * Publishes the dead letter, then settles the offset. A publish that failed for good fails
   * with a {@link DeadLetterFailedException} (a {@link dev.idem.NonRetryableException}: the
   * publisher already retried what can be retried), logs it at ERROR and holds the partition's
   * commits at this record.
   */
  @Override
  protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
    return publisher.publish(record(), decodedId(), deadLetter)
        .onErrorMap(error -> !(error instanceof DeadLetterFailedException), error -> {
          String topic = publisher.deadLetterTopic(record().topic());
          holds.deadLetterFailed(record(), idForLogs(), topic, error);
          return new DeadLetterFailedException("the dead letter of " + coordinates() + " failed for good on " + topic + ": "
              + LogText.error(error), error);
        })
        .then(Mono.fromRunnable(() -> {
          settle.run();
          holds.settled(record());
        }));
  }
}
