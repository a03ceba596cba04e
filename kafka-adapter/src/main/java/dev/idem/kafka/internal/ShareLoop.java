package dev.idem.kafka.internal;

import dev.idem.Delivery;
import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * One share consumer on a thread of its own. It polls, hands the poll's records downstream, and
 * then, as explicit acknowledgement requires, waits until every one of them is settled before it
 * polls again; the next poll carries the acknowledgements to the broker. While it waits it
 * applies the settlements the pipeline sends ({@code ACCEPT}, {@code REJECT}, {@code RELEASE};
 * the client is single-threaded, so only this thread touches it), and warns once per poll when
 * its records near their acquisition lock (the broker's, from kafka-clients 4.2; else the
 * broker's default of 30 s).
 *
 * <p>Stopping (the subscription cancelled) releases every record of the poll not yet settled
 * ({@code RELEASE}: the broker hands it to another consumer at once), commits the
 * acknowledgements (up to the close timeout) and closes the consumer, which leaves the group.
 */
final class ShareLoop<T> implements Runnable {

  private static final Logger log = LoggerFactory.getLogger(ShareLoop.class);
  private static final Duration POLL_TIMEOUT = Duration.ofMillis(500);
  private static final long WAIT_STEP_MILLIS = 50;
  /** The acquisition lock assumed when the client cannot tell it (kafka-clients 4.1): the broker's default. */
  static final int DEFAULT_LOCK_MILLIS = 30_000;

  private record Settlement(ConsumerRecord<byte[], byte[]> record, AcknowledgeType type, MonoSink<Void> sink) {}

  private record Key(String topic, int partition, long offset) {
    static Key of(ConsumerRecord<?, ?> record) {
      return new Key(record.topic(), record.partition(), record.offset());
    }
  }

  private final String group;
  private final List<String> topics;
  private final Supplier<ShareConsumer<byte[], byte[]>> consumers;
  private final BiFunction<ConsumerRecord<byte[], byte[]>, ShareDelivery.Settler, Delivery<T>> deliveries;
  private final FluxSink<Delivery<T>> sink;
  private final Duration closeTimeout;
  private final BlockingQueue<Settlement> settlements = new LinkedBlockingQueue<>();
  private final CompletableFuture<Void> closed = new CompletableFuture<>();
  private final Thread thread;
  private volatile boolean stopping;
  private volatile boolean done;
  private volatile ShareConsumer<byte[], byte[]> consumer;

  ShareLoop(String group, String name, List<String> topics, Supplier<ShareConsumer<byte[], byte[]>> consumers,
      BiFunction<ConsumerRecord<byte[], byte[]>, ShareDelivery.Settler, Delivery<T>> deliveries, FluxSink<Delivery<T>> sink,
      Duration closeTimeout) {
    this.group = group;
    this.topics = List.copyOf(topics);
    this.consumers = consumers;
    this.deliveries = deliveries;
    this.sink = sink;
    this.closeTimeout = closeTimeout;
    this.thread = new Thread(this, name);
    this.thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  /** Completes once the consumer has released, committed and closed. */
  CompletableFuture<Void> closed() {
    return closed;
  }

  /** Stops the loop: it releases what is unsettled, commits, closes. Returns at once. */
  void stop() {
    stopping = true;
    ShareConsumer<byte[], byte[]> c = consumer;
    if (c != null) {
      c.wakeup();
    }
  }

  /** Queues a settlement for this loop's thread; completes once the client has it, fails when the loop is gone. */
  Mono<Void> settle(ConsumerRecord<byte[], byte[]> record, AcknowledgeType type) {
    return Mono.create(sink -> {
      settlements.add(new Settlement(record, type, sink));
      if (done) {
        refuseQueued();
      }
    });
  }

  @Override
  public void run() {
    Map<Key, ConsumerRecord<byte[], byte[]>> inFlight = new LinkedHashMap<>();
    Throwable failure = null;
    try {
      consumer = consumers.get();
      if (stopping) {
        return;
      }
      consumer.setAcknowledgementCommitCallback(this::committed);
      consumer.subscribe(topics);
      while (!stopping) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL_TIMEOUT);
        if (records.isEmpty()) {
          continue;
        }
        for (ConsumerRecord<byte[], byte[]> record : records) {
          inFlight.put(Key.of(record), record);
        }
        for (ConsumerRecord<byte[], byte[]> record : records) {
          sink.next(deliveries.apply(record, this::settle));
        }
        awaitSettled(inFlight);
      }
    } catch (WakeupException e) {
      if (!stopping) {
        failure = e;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable e) {
      failure = e;
    } finally {
      close(inFlight);
      if (failure != null) {
        sink.error(failure);
      } else {
        sink.complete();
      }
    }
  }

  /** Applies settlements until every record of the poll has one, warning when they near their lock. */
  private void awaitSettled(Map<Key, ConsumerRecord<byte[], byte[]>> inFlight) throws InterruptedException {
    long polledAt = System.nanoTime();
    long lockNanos = TimeUnit.MILLISECONDS.toNanos(ShareClients.acquisitionLockTimeoutMs(consumer).orElse(DEFAULT_LOCK_MILLIS));
    boolean warned = false;
    while (!inFlight.isEmpty() && !stopping) {
      Settlement first = settlements.poll(WAIT_STEP_MILLIS, TimeUnit.MILLISECONDS);
      if (first != null) {
        apply(first, inFlight);
        for (Settlement s = settlements.poll(); s != null; s = settlements.poll()) {
          apply(s, inFlight);
        }
      }
      if (inFlight.isEmpty()) {
        return;
      }
      long now = System.nanoTime();
      if (!warned && now - polledAt >= lockNanos * 4 / 5) {
        warned = true;
        ConsumerRecord<byte[], byte[]> oldest = inFlight.values().iterator().next();
        log.warn("Kafka share source '{}': {} records of a poll are still in flight after {} ms of their {} ms acquisition lock,"
            + " for example {}-{}@{}; when the lock runs out the broker delivers them to another consumer (the dedup table keeps"
            + " each effect single). Raise the group's share.record.lock.duration.ms above the slowest handler", group, inFlight.size(),
            TimeUnit.NANOSECONDS.toMillis(now - polledAt), TimeUnit.NANOSECONDS.toMillis(lockNanos), oldest.topic(), oldest.partition(),
            oldest.offset());
      }
    }
  }

  private void apply(Settlement settlement, Map<Key, ConsumerRecord<byte[], byte[]>> inFlight) {
    ConsumerRecord<byte[], byte[]> held = inFlight.remove(Key.of(settlement.record()));
    if (held == null) {
      settlement.sink().error(new IllegalStateException("record " + settlement.record().topic() + "-" + settlement.record().partition()
          + "@" + settlement.record().offset() + " is not held by this share consumer; the broker delivers it again"));
      return;
    }
    try {
      consumer.acknowledge(held, settlement.type());
      settlement.sink().success();
    } catch (RuntimeException e) {
      settlement.sink().error(e);
    }
  }

  private void committed(Map<TopicIdPartition, Set<Long>> offsets, Exception error) {
    if (error != null) {
      log.warn("Kafka share source '{}': the broker refused acknowledgements of {} ({}); records whose acquisition lock ran out are"
          + " delivered again and found duplicates", group, offsets, LogText.error(error));
    }
  }

  /** Releases the unsettled records of the last poll, commits, closes; fails settlements that come later. */
  private void close(Map<Key, ConsumerRecord<byte[], byte[]>> inFlight) {
    try {
      if (consumer != null) {
        for (Settlement s = settlements.poll(); s != null; s = settlements.poll()) {
          apply(s, inFlight);
        }
        for (ConsumerRecord<byte[], byte[]> record : inFlight.values()) {
          consumer.acknowledge(record, AcknowledgeType.RELEASE);
        }
        if (!inFlight.isEmpty()) {
          log.info("Kafka share source '{}' released {} unsettled records on stopping; the broker delivers them again", group,
              inFlight.size());
        }
        inFlight.clear();
        try {
          try {
            consumer.commitSync(closeTimeout);
          } catch (WakeupException e) {
            // The stop's wakeup, when it came outside a poll: it is spent now.
            consumer.commitSync(closeTimeout);
          }
        } catch (RuntimeException e) {
          log.warn("Kafka share source '{}' could not commit its acknowledgements on stopping ({}); records whose acceptance was"
              + " lost are delivered again and found duplicates", group, LogText.error(e));
        }
        consumer.close(closeTimeout);
      }
    } catch (RuntimeException e) {
      log.warn("Kafka share source '{}': closing its consumer failed: {}", group, LogText.error(e));
    } finally {
      done = true;
      refuseQueued();
      closed.complete(null);
    }
  }

  private void refuseQueued() {
    for (Settlement s = settlements.poll(); s != null; s = settlements.poll()) {
      s.sink().error(new IllegalStateException("record " + s.record().topic() + "-" + s.record().partition() + "@" + s.record().offset()
          + " was not settled: its share consumer has closed, and the broker delivers it again"));
    }
  }
}
