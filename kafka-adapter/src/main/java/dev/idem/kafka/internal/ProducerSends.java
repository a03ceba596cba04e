package dev.idem.kafka.internal;

import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Sends records with a kafka-clients {@link Producer} as {@link Mono}s. {@code send} is called
 * on one thread of this object's own, in subscription order, because it can block (up to
 * {@code max.block.ms} while metadata is fetched) and must not block a pipeline thread; the
 * result is delivered on Reactor's parallel scheduler, never on the producer's network thread.
 * A send that throws at once (a serializer, a record too large, the producer closed) fails the
 * {@code Mono} with that error.
 */
public final class ProducerSends implements AutoCloseable {

  private static final AtomicInteger COUNTER = new AtomicInteger();

  private final Producer<byte[], byte[]> producer;
  private final Scheduler sending;

  /**
   * @param producer the producer, closed by {@link #close()}
   * @param name names the sending thread
   */
  public ProducerSends(Producer<byte[], byte[]> producer, String name) {
    this.producer = producer;
    this.sending = Schedulers.newSingle("idem-kafka-send-" + name + "-" + COUNTER.incrementAndGet(), true);
  }

  /**
   * Sends one record.
   *
   * @param record the record
   * @return the broker's acknowledgement
   */
  public Mono<RecordMetadata> send(ProducerRecord<byte[], byte[]> record) {
    return Mono.<RecordMetadata>create(sink -> producer.send(record, (metadata, error) -> {
      if (error != null) {
        sink.error(error);
      } else {
        sink.success(metadata);
      }
    }))
        .subscribeOn(sending)
        .publishOn(Schedulers.parallel());
  }

  /** Closes the producer (waiting for its sends in flight) and the sending thread. */
  @Override
  public void close() {
    try {
      producer.close();
    } finally {
      sending.dispose();
    }
  }
}
