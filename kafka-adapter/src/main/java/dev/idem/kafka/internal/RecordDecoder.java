package dev.idem.kafka.internal;

import dev.idem.internal.LogText;
import dev.idem.kafka.KafkaSourceOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns a record's bytes into what a delivery says: the payload (or why it could not be decoded)
 * and the message id (or why it is invalid). Shared by the consumer-group and the share-group
 * sources. Never throws: whatever the deserializer or the id extractor throws, JVM errors
 * included, makes the record a poison pill or falls back to the offset id.
 *
 * @param <T> the payload type
 */
final class RecordDecoder<T> {

  private static final Logger log = LoggerFactory.getLogger(RecordDecoder.class);

  /** What a record says. */
  record Decoded<T>(@Nullable T payload, @Nullable Throwable decodingFailure, @Nullable String id, @Nullable String invalidId) {}

  private final Deserializer<T> deserializer;
  private final MessageIds<T> ids;
  private final boolean offsetFallbackId;

  RecordDecoder(KafkaSourceOptions<T> options) {
    this.deserializer = options.valueDeserializer();
    this.ids = new MessageIds<>(options.messageIdHeader(), options.messageIdExtractor(), options.offsetFallbackId());
    this.offsetFallbackId = options.offsetFallbackId();
  }

  Decoded<T> decode(ConsumerRecord<byte[], byte[]> record) {
    T payload = null;
    Throwable failure = null;
    if (record.value() != null) {
      try {
        payload = deserializer.deserialize(record.topic(), record.headers(), record.value());
      } catch (Throwable e) {
        // Any Throwable makes the record a poison pill, JVM errors included: an AssertionError, the
        // StackOverflowError of a recursive parser, the OutOfMemoryError of a decoder that trusts a
        // corrupt length field, a LinkageError. Reactor would rethrow those from map(), killing the
        // receiver's thread, or fail the stream, which redelivers the same record in an endless loop.
        failure = e;
        if (e instanceof Error) {
          log.warn("Value deserializer threw {} on {}-{}@{}; the record is a poison pill: {}", e.getClass().getName(),
              record.topic(), record.partition(), record.offset(), LogText.error(e));
        }
      }
    }
    String id = null;
    String invalidId = null;
    try {
      id = ids.resolve(record, payload);
    } catch (MessageIds.InvalidIdException e) {
      invalidId = e.getMessage();
    } catch (Throwable e) {
      // The application's extractor; whatever it throws, Errors included, must not stop the stream.
      log.warn("Message id extractor failed on {}-{}@{}; using the fallback: {}", record.topic(), record.partition(),
          record.offset(),
          LogText.error(e));
      id = offsetFallbackId ? MessageIds.offsetId(record.topic(), record.partition(), record.offset()) : null;
    }
    return new Decoded<>(payload, failure, id, invalidId);
  }
}
