package dev.idem.kafka.internal;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import reactor.core.publisher.MonoSink;

/**
 * A settlement the pipeline sent a share consumer's thread: the record, how it is acknowledged,
 * and who learns that the client has it.
 */
record ShareSettlement(ConsumerRecord<byte[], byte[]> record, AcknowledgeType type, MonoSink<Void> sink) {

  /** The record as a log line names it. */
  String where() {
    return record.topic() + "-" + record.partition() + "@" + record.offset();
  }
}
