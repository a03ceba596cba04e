package dev.idem.kafka.internal;

import dev.idem.DeadLetter;
import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaSourceOptions;
import java.time.Duration;
import java.util.function.UnaryOperator;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RetriableException;
import org.jspecify.annotations.Nullable;
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
  private final @Nullable AutoCloseable producerMetrics;

  DeadLetterPublisher(ProducerSends sender, UnaryOperator<String> topicNaming, String idHeader,
      Duration firstBackoff, Duration maxBackoff) {
    this(sender, topicNaming, idHeader, firstBackoff, maxBackoff, null);
  }

  private DeadLetterPublisher(ProducerSends sender, UnaryOperator<String> topicNaming, String idHeader,
      Duration firstBackoff, Duration maxBackoff, @Nullable AutoCloseable producerMetrics) {
    this.producerMetrics = producerMetrics;
    this.sender = sender;
    this.topicNaming = topicNaming;
    this.idHeader = idHeader;
    this.firstBackoff = firstBackoff;
    this.maxBackoff = maxBackoff;
  }

  /**
   * The dead-letter publisher of a source: its own producer ({@link SourceEngine#producerProperties}),
   * bound to the options' meter registry when there is one; closing the publisher closes both.
   *
   * @param options the source's options
   * @return the publisher
   */
  static DeadLetterPublisher forSource(KafkaSourceOptions<?> options) {
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(SourceEngine.producerProperties(options));
    AutoCloseable metrics = options.meterRegistry() == null
        ? null
        : MicrometerBinding.bind(producer, options.meterRegistry(), options.groupId());
    return new DeadLetterPublisher(new ProducerSends(producer, "dlt-" + options.groupId()), options::deadLetterTopic,
        options.messageIdHeader(), options.reconnectBackoff(), options.reconnectMaxBackoff(), metrics);
  }

  /**
   * Publishes the dead letter of a record.
   *
   * @param original the consumed record
   * @param messageId its id, or {@code null}
   * @param deadLetter why it is dead-lettered
   * @return completes when the broker acknowledged the dead-letter record
   */
  public Mono<Void> publish(ConsumerRecord<byte[], byte[]> original, @Nullable String messageId, DeadLetter deadLetter) {
    return Mono.defer(() -> {
      String topic = deadLetterTopic(original.topic());
      ProducerRecord<byte[], byte[]> record = DeadLetterRecords.deadLetterRecord(topic, original, messageId, idHeader,
          deadLetter);
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
    try {
      sender.close();
    } finally {
      if (producerMetrics != null) {
        try {
          producerMetrics.close();
        } catch (Exception e) {
          log.debug("closing the dead-letter producer's metrics failed", e);
        }
      }
    }
  }
}
