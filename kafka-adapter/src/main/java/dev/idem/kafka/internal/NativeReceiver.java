package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSourceOptions;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;

/**
 * The native engine ({@link dev.idem.kafka.KafkaEngine#NATIVE}): each subscription runs a
 * kafka-clients {@link KafkaConsumer} on a {@link PollLoop} thread of its own.
 */
final class NativeReceiver implements RecordReceiver {

  private final KafkaSourceOptions<?> options;
  private final Map<String, Object> consumerProperties;
  private final Function<Consumer<byte[], byte[]>, AutoCloseable> metrics;
  private final ClosingConsumers closing;
  private final Duration unassignedWarningAfter;

  NativeReceiver(KafkaSourceOptions<?> options, Map<String, Object> consumerProperties,
      Function<Consumer<byte[], byte[]>, AutoCloseable> metrics) {
    this(options, consumerProperties, metrics, UnassignedWatch.DEFAULT_WARNING_AFTER);
  }

  NativeReceiver(KafkaSourceOptions<?> options, Map<String, Object> consumerProperties,
      Function<Consumer<byte[], byte[]>, AutoCloseable> metrics, Duration unassignedWarningAfter) {
    this.unassignedWarningAfter = unassignedWarningAfter;
    this.options = options;
    this.consumerProperties = Map.copyOf(consumerProperties);
    this.metrics = metrics;
    this.closing = new ClosingConsumers("Kafka source '" + options.groupId() + "'", options.closeTimeout());
  }

  @Override
  public Flux<Received> receive(CommitHolds holds) {
    return Flux.create(sink -> {
      PollLoop loop = new PollLoop(options, () -> new KafkaConsumer<>(consumerProperties), metrics, holds, sink,
          unassignedWarningAfter);
      CompletableFuture<Void> closed = loop.closed();
      sink.onRequest(loop::request);
      sink.onDispose(() -> {
        loop.stop();
        closing.stopping(closed);
      });
      loop.start();
    }, FluxSink.OverflowStrategy.BUFFER);
  }

  @Override
  public void close() {
    closing.await();
  }
}
