package dev.idem;

import java.time.Duration;

/**
 * What the pipeline reports about its work, for metrics. Implementations must be thread-safe
 * and fast; they are called on the pipeline's threads. {@link #NONE} is the default; a
 * Micrometer implementation is {@code dev.idem.micrometer.MicrometerConsumerMetrics}.
 */
public interface ConsumerMetrics {

  /** Reports nothing. */
  ConsumerMetrics NONE = new ConsumerMetrics() {};

  /**
   * A message was taken from the source (it may still wait in the prefetch buffer).
   *
   * @param delivery the message
   */
  default void received(Delivery<?> delivery) {}

  /**
   * A message's processing started; it is in flight until {@link #settled} or {@link #abandoned}.
   *
   * @param delivery the message
   */
  default void started(Delivery<?> delivery) {}

  /**
   * A lane formed a micro-batch of {@code messages} and hands it on: what batching really does
   * under the load at hand (batches never wait to fill, so they are as large as the messages
   * waiting when a lane is free, up to {@code maxBatchSize}); always 1 with {@code maxBatchSize(1)}.
   * A batch that splits after a failure is not reported again; a message that its batch left
   * for a later one (its key waits for a message retried off the lane) counts in both.
   *
   * @param messages the messages in the batch
   */
  default void batch(int messages) {}

  /**
   * An attempt failed and will be retried.
   *
   * @param delivery the message
   * @param error the failure
   * @param kind how it was classified
   */
  default void retrying(Delivery<?> delivery, Throwable error, ErrorKind kind) {}

  /**
   * One transaction (dedup row plus handler) finished, committed or not.
   *
   * @param delivery the message
   * @param duration how long the transaction took
   * @param committed whether it committed
   */
  default void transaction(Delivery<?> delivery, Duration duration, boolean committed) {}

  /**
   * The handler ran to completion within a transaction.
   *
   * @param delivery the message
   * @param duration how long the handler took
   */
  default void handler(Delivery<?> delivery, Duration duration) {}

  /**
   * A message was settled and its outcome emitted.
   *
   * @param outcome the outcome
   */
  default void settled(Outcome<?> outcome) {}

  /**
   * A message left the pipeline unsettled (cancelled, or its acknowledgement failed); the broker
   * will redeliver it.
   *
   * @param delivery the message
   */
  default void abandoned(Delivery<?> delivery) {}

  /**
   * Settling a message with the broker failed for good: the adapter already retried what it
   * could. The message stays unacknowledged (the broker redelivers it; on Kafka the partition's
   * commits wait for it). {@link #abandoned} follows.
   *
   * @param delivery the message
   * @param step {@code "ack"} or {@code "dead-letter"}
   * @param error the failure
   */
  default void settlementFailed(Delivery<?> delivery, String step, Throwable error) {}
}
