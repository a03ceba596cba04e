package dev.idem.kafka.internal;

import dev.idem.Delivery;
import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaSourceOptions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;

/**
 * The machinery behind {@link dev.idem.kafka.KafkaShareSource}: per subscription, a number of
 * {@link ShareLoop share consumers} in the group, each on its own thread, merged into one stream;
 * decoding and ids as on the consumer-group source; the dead-letter producer.
 *
 * @param <T> the payload type
 */
public final class ShareEngine<T> implements AutoCloseable {

  /** The share consumer's acknowledgement mode property (kafka-clients 4.1+). */
  static final String ACKNOWLEDGEMENT_MODE = "share.acknowledgement.mode";

  private final KafkaSourceOptions<T> options;
  private final int consumers;
  private final RecordDecoder<T> decoder;
  private final DeadLetterPublisher publisher;
  private final Map<String, Object> consumerProperties;
  private final ClosingConsumers closing;

  /**
   * @param options validated options
   * @param consumers share consumers per subscription, at least 1
   * @throws IllegalStateException when kafka-clients is older than 4.1
   * @throws IllegalArgumentException when the options select Reactor Kafka, or {@code consumers < 1}
   */
  public ShareEngine(KafkaSourceOptions<T> options, int consumers) {
    ShareClients.require(options.groupId());
    if (options.engine() == KafkaEngine.REACTOR_KAFKA) {
      throw new IllegalArgumentException("Kafka share source '" + options.groupId() + "': Reactor Kafka has no share consumer;"
          + " leave the engine at NATIVE");
    }
    if (consumers < 1) {
      throw new IllegalArgumentException(
          "Kafka share source '" + options.groupId() + "': consumers must be at least 1, was " + consumers);
    }
    this.options = options;
    this.consumers = consumers;
    this.decoder = new RecordDecoder<>(options);
    this.consumerProperties = Map.copyOf(consumerProperties(options, consumers));
    this.closing = new ClosingConsumers("Kafka share source '" + options.groupId() + "'", options.closeTimeout());
    this.publisher = DeadLetterPublisher.forSource(options);
  }

  /**
   * The share consumer's properties: the user's, then the group, byte-array deserializers, explicit
   * acknowledgement and each consumer's share of the prefetch as {@code max.poll.records}.
   */
  static Map<String, Object> consumerProperties(KafkaSourceOptions<?> options, int consumers) {
    Map<String, Object> props = new HashMap<>(options.consumerProperties());
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, options.groupId());
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ACKNOWLEDGEMENT_MODE, "explicit");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Math.max(1, options.prefetch() / consumers));
    return props;
  }

  /**
   * The records of {@code consumers} new share consumers, merged. Each is recreated with backoff
   * after it failed; an invalid configuration ends the stream.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    List<Flux<Delivery<T>>> each = new ArrayList<>(consumers);
    for (int i = 0; i < consumers; i++) {
      int index = i;
      each.add(SourceEngine.recreatedOnFailure(Flux.defer(() -> oneConsumer(index)), options, "Kafka share source"));
    }
    return Flux.merge(each);
  }

  private Flux<Delivery<T>> oneConsumer(int index) {
    return Flux.create(sink -> {
      ShareLoop<T> loop = new ShareLoop<>(options.groupId(), "idem-kafka-share-" + options.groupId() + "-" + index,
          options.topics(),
          () -> new KafkaShareConsumer<>(consumerProperties), this::delivery, sink, options.closeTimeout(),
          ShareMeters.of(options.meterRegistry(), options.groupId(), index));
      CompletableFuture<Void> closed = loop.closed();
      sink.onDispose(() -> {
        loop.stop();
        closing.stopping(closed);
      });
      loop.start();
    }, FluxSink.OverflowStrategy.BUFFER);
  }

  private Delivery<T> delivery(ConsumerRecord<byte[], byte[]> record, ShareDelivery.Settler settler) {
    return new ShareDelivery<>(record, decoder.decode(record), settler, publisher);
  }

  /**
   * Waits (up to the close timeout and a second) until the consumers cancelled before released
   * what they held, committed and closed, then closes the dead-letter producer.
   */
  @Override
  public void close() {
    try {
      closing.await();
    } finally {
      publisher.close();
    }
  }
}
