package dev.idem.kafka.internal;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import reactor.core.publisher.Flux;

/**
 * Where a source's records come from: the engine behind {@link SourceEngine}. Each
 * {@link #receive} subscription runs its own Kafka consumer in the group.
 */
interface RecordReceiver extends AutoCloseable {

  /** One record and what settles its offset (idempotent; ignored once its partition is gone). */
  record Received(ConsumerRecord<byte[], byte[]> record, Runnable settle) {}

  /**
   * The records of one new consumer. Cancelling commits the settled offsets (waiting for the
   * broker's answer up to the close timeout), then closes the consumer.
   *
   * @param holds the consumer's commit holds, told of revoked partitions
   * @return the records
   */
  Flux<Received> receive(CommitHolds holds);

  /** Waits, up to the close timeout, until the consumers cancelled before have committed and closed. */
  @Override
  void close();
}
