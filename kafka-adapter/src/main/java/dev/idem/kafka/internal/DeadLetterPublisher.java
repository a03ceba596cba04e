package dev.idem.kafka.internal;

import dev.idem.DeadLetter;
import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.function.UnaryOperator;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RetriableException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.util.retry.Retry;

/**
 * Publishes dead letters with an idempotent {@code acks=all} producer and completes only when
 * the broker acknowledged the record. Retriable broker errors (broker unavailable, timeouts,
 * topic being created) are retried with backoff, a WARN per retry, until the publish succeeds or
 * the pipeline is cancelled, because a broken broker is not the message's fault. Any other error
 * (a record too large for the topic, a producer not authorised to write it) is final and fails
 * the publish at once.
 */
public final class DeadLetterPublisher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(DeadLetterPublisher.class);

  private final ProducerSends sender;
  private final UnaryOperator<String> topicNaming;
  private final String idHeader;
  private final Duration firstBackoff;
  private final Duration maxBackoff;

  DeadLetterPublisher(ProducerSends sender, UnaryOperator<String> topicNaming, String idHeader,
      Duration firstBackoff, Duration maxBackoff) {
    this.sender = sender;
    this.topicNaming = topicNaming;
    this.idHeader = idHeader;
    this.firstBackoff = firstBackoff;
    this.maxBackoff = maxBackoff;
  }

  /**
   * Publishes the dead letter of a record.
   *
   * @param original the consumed record
   * @param messageId its id, or {@code null}
   * @param deadLetter why it is dead-lettered
   * @return completes when the broker acknowledged the dead-letter record
   */
  public Mono<Void> publish(ConsumerRecord<byte[], byte[]> original, String messageId, DeadLetter deadLetter) {
    return Mono.defer(() -> {
      String topic = deadLetterTopic(original.topic());
      ProducerRecord<byte[], byte[]> record = DeadLetterRecords.deadLetterRecord(topic, original, messageId, idHeader, deadLetter);
      return sender.send(record).then();
    })
        .retryWhen(Retry.backoff(Long.MAX_VALUE, firstBackoff).maxBackoff(maxBackoff)
            .filter(DeadLetterPublisher::isRetriable)
            .doBeforeRetry(signal -> log.warn("Dead-letter publish of {}-{}@{} failed, retrying (attempt {}): {}",
                original.topic(), original.partition(), original.offset(), signal.totalRetriesInARow() + 1,
                LogText.error(signal.failure()))));
  }

  /**
   * The dead-letter topic of a source topic.
   *
   * @param topic the source topic
   * @return its dead-letter topic
   */
  String deadLetterTopic(String topic) {
    return topicNaming.apply(topic);
  }

  static boolean isRetriable(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof RetriableException) {
        return true;
      }
    }
    return false;
  }

  @Override
  public void close() {
    sender.close();
  }
}
