package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaSourceOptions;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.scheduler.Schedulers;

/**
 * The native engine ({@link dev.idem.kafka.KafkaEngine#NATIVE}): each subscription runs a
 * kafka-clients {@link KafkaConsumer} on a {@link PollLoop} thread of its own.
 */
final class NativeReceiver implements RecordReceiver {

  private static final Logger log = LoggerFactory.getLogger(NativeReceiver.class);

  private final KafkaSourceOptions<?> options;
  private final Map<String, Object> consumerProperties;
  private final Function<Consumer<byte[], byte[]>, AutoCloseable> metrics;
  private final Set<CompletableFuture<Void>> closing = ConcurrentHashMap.newKeySet();
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
        if (!closed.isDone()) {
          closing.add(closed);
          closed.whenComplete((ignored, error) -> closing.remove(closed));
        }
      });
      loop.start();
    }, FluxSink.OverflowStrategy.BUFFER);
  }

  @Override
  public void close() {
    if (closing.isEmpty()) {
      return;
    }
    if (Schedulers.isInNonBlockingThread()) {
      log.warn("Kafka source '{}' closed on a non-blocking thread; not waiting for its cancelled consumers to commit and close",
          options.groupId());
      return;
    }
    CompletableFuture<?> all = CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new));
    try {
      // Committing and closing each take up to the close timeout.
      all.get(options.closeTimeout().toMillis() * 2 + 1_000, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      log.warn("Kafka source '{}': its cancelled consumers did not close within {}", options.groupId(),
          options.closeTimeout().multipliedBy(2));
    } catch (ExecutionException e) {
      log.warn("Kafka source '{}': a cancelled consumer failed while closing", options.groupId(), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
