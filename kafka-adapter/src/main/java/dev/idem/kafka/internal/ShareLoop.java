package dev.idem.kafka.internal;

import dev.idem.Delivery;
import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
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
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.errors.WakeupException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;

/**
 * One share consumer on a thread of its own. It polls, hands the poll's records downstream, and
 * then, as explicit acknowledgement requires, polls again only once every record it holds is
 * acknowledged; the next poll carries the acknowledgements to the broker. While it waits it
 * applies the settlements the pipeline sends ({@code ACCEPT}, {@code REJECT}, {@code RELEASE};
 * the client is single-threaded, so only this thread touches it).
 *
 * <p><b>Acquisition locks.</b> With kafka-clients 4.2 and later, records still in flight at half
 * their lock (the lock the broker reported) are renewed ({@code RENEW}, KIP-1222). The renewal
 * goes out at once on an acknowledgement request ({@code commitAsync}), which fetches nothing; the
 * loop polls again only once the broker has answered every renewal, and that poll hands the
 * renewed records back without fetching. A poll made while a renewal is unanswered would make the
 * client fetch new records into its buffer, where nothing renews them while the slow record holds
 * the loop, and their locks would run out there. A settlement that comes in between waits for its
 * record ({@link HeldRecords}). A renewal the broker refuses ends with the record delivered again,
 * and the dedup row keeps the effect single.
 * Older clients cannot renew: a WARN names the records when 80% of the lock (else the broker's
 * default of 30 s) has passed.
 *
 * <p>Stopping (the subscription cancelled) releases every acquired record not yet settled
 * ({@code RELEASE}: the broker hands it to another consumer at once), commits the
 * acknowledgements (up to the close timeout) and closes the consumer, which leaves the group
 * (records whose renewal was under way return to the group then).
 */
final class ShareLoop<T> implements Runnable {

  private static final Logger log = LoggerFactory.getLogger(ShareLoop.class);
  private static final Duration POLL_TIMEOUT = Duration.ofMillis(500);
  /** How long a poll waits for renewed records to come back before the loop looks at its settlements again. */
  private static final Duration RENEWAL_POLL_TIMEOUT = Duration.ofMillis(50);
  private static final long WAIT_STEP_MILLIS = 50;
  /** How long the loop waits for settlements between two looks at the broker's answers to renewals. */
  private static final long ANSWER_STEP_MILLIS = 5;
  /**
   * How much longer than the lock the loop waits for the broker's answer to a renewal: the client's
   * own bound ({@code default.api.timeout.ms}, 60 s by default) answers it within that.
   */
  private static final long ANSWER_LIMIT_NANOS = TimeUnit.SECONDS.toNanos(60);
  /** The acquisition lock assumed when the client cannot tell it (kafka-clients 4.1): the broker's default. */
  static final int DEFAULT_LOCK_MILLIS = 30_000;

  private final String group;
  private final List<String> topics;
  private final Supplier<ShareConsumer<byte[], byte[]>> consumers;
  private final BiFunction<ConsumerRecord<byte[], byte[]>, ShareDelivery.Settler, Delivery<T>> deliveries;
  private final FluxSink<Delivery<T>> sink;
  private final Duration closeTimeout;
  private final ShareMeters meters;
  private final BlockingQueue<ShareSettlement> settlements = new LinkedBlockingQueue<>();
  private final CompletableFuture<Void> closed = new CompletableFuture<>();
  private final HeldRecords held = new HeldRecords();
  private final Thread thread;
  private volatile boolean stopping;
  private volatile boolean done;
  private volatile @Nullable ShareConsumer<byte[], byte[]> consumer;
  /** {@code RENEW}, while the client offers it and the broker has not refused it. */
  private @Nullable AcknowledgeType renew = ShareClients.renew().orElse(null);
  private long lockNanos = TimeUnit.MILLISECONDS.toNanos(DEFAULT_LOCK_MILLIS);
  private boolean renewedBefore;
  /** The lock time of the records last warned about, so that a poll's records are warned about once. */
  private long warnedAt = Long.MIN_VALUE;

  ShareLoop(String group, String name, List<String> topics, Supplier<ShareConsumer<byte[], byte[]>> consumers,
      BiFunction<ConsumerRecord<byte[], byte[]>, ShareDelivery.Settler, Delivery<T>> deliveries, FluxSink<Delivery<T>> sink,
      Duration closeTimeout, ShareMeters meters) {
    this.group = group;
    this.topics = List.copyOf(topics);
    this.consumers = consumers;
    this.deliveries = deliveries;
    this.sink = sink;
    this.closeTimeout = closeTimeout;
    this.meters = meters;
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
      settlements.add(new ShareSettlement(record, type, sink));
      if (done) {
        refuseQueued();
      }
    });
  }

  @Override
  public void run() {
    Throwable failure = null;
    try {
      consumer = consumers.get();
      if (stopping) {
        return;
      }
      consumer.setAcknowledgementCommitCallback(this::committed);
      consumer.subscribe(topics);
      meters.bind(consumer);
      while (!stopping) {
        if (held.anyAcquired()) {
          awaitSettlements();
          continue;
        }
        applyQueued();
        if (held.anyUnanswered()) {
          awaitRenewalAnswers();
          continue;
        }
        ConsumerRecords<byte[], byte[]> records = consumer.poll(held.anyRenewing() ? RENEWAL_POLL_TIMEOUT : POLL_TIMEOUT);
        long now = System.nanoTime();
        lockNanos = TimeUnit.MILLISECONDS.toNanos(ShareClients.acquisitionLockTimeoutMs(consumer).orElse(DEFAULT_LOCK_MILLIS));
        lost(held.dropOverdue(now, lockNanos), "its renewal did not come back within the lock");
        if (!records.isEmpty()) {
          take(held.absorb(records, now));
        }
        meters.held(held.size());
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
      close();
      if (failure != null) {
        sink.error(failure);
      } else {
        sink.complete();
      }
    }
  }

  /** Hands fresh records downstream and applies the settlements that waited for returned ones. */
  private void take(HeldRecords.Polled polled) {
    lost(polled.lost(), "the broker delivered it again before its renewal came back");
    for (HeldRecords.Held returned : polled.returned()) {
      apply(Objects.requireNonNull(held.takeWaiting(returned), "a returned record brings its settlement"));
    }
    for (ConsumerRecord<byte[], byte[]> record : polled.fresh()) {
      sink.next(deliveries.apply(record, this::settle));
    }
  }

  /** Applies settlements for one wait step, then renews (or warns about) locks that near their end. */
  private void awaitSettlements() throws InterruptedException {
    ShareSettlement first = settlements.poll(WAIT_STEP_MILLIS, TimeUnit.MILLISECONDS);
    if (first != null) {
      apply(first);
      applyQueued();
    }
    meters.held(held.size());
    HeldRecords.Held oldest = held.oldestAcquired();
    if (oldest == null) {
      return;
    }
    long now = System.nanoTime();
    long heldNanos = now - oldest.lockedAt();
    if (renew != null && heldNanos >= lockNanos / 2) {
      renewAcquired(now, oldest);
    } else if (renew == null && heldNanos >= lockNanos * 4 / 5 && warnedAt != oldest.lockedAt()) {
      warnedAt = oldest.lockedAt();
      log.warn(
          "Kafka share source '{}': {} records are still in flight after {} ms of their {} ms acquisition lock, for example {};"
              + " when the lock runs out the broker delivers them to another consumer (the dedup table keeps each effect single)."
              + " kafka-clients 4.2 renews locks; with this client, raise the group's share.record.lock.duration.ms above the slowest"
              + " handler",
          group, held.size(), TimeUnit.NANOSECONDS.toMillis(heldNanos), TimeUnit.NANOSECONDS.toMillis(lockNanos),
          HeldRecords.Key.of(oldest.record()));
    }
  }

  /**
   * Waits for the broker to answer the renewals sent: {@code commitAsync} sends the acceptances
   * settled meanwhile and takes the answers that came (they reach {@link #committed}); renewals
   * unanswered within the lock are given up.
   */
  private void awaitRenewalAnswers() throws InterruptedException {
    consumer().commitAsync();
    long now = System.nanoTime();
    lost(held.dropOverdue(now, lockNanos), "its renewal was not answered within the lock");
    int unanswered = held.forgetUnansweredSentBefore(now - lockNanos - ANSWER_LIMIT_NANOS);
    if (unanswered > 0) {
      log.warn(
          "Kafka share source '{}': the broker answered {} lock renewals in neither the lock nor {} s more; the consumer polls"
              + " again without them",
          group, unanswered, TimeUnit.NANOSECONDS.toSeconds(ANSWER_LIMIT_NANOS));
    }
    if (held.anyUnanswered()) {
      ShareSettlement first = settlements.poll(ANSWER_STEP_MILLIS, TimeUnit.MILLISECONDS);
      if (first != null) {
        apply(first);
        applyQueued();
      }
    }
    meters.held(held.size());
  }

  /** Sends {@code RENEW} for every acquired record at once; the poll after the broker's answer returns the records. */
  private void renewAcquired(long now, HeldRecords.Held oldest) {
    List<HeldRecords.Held> acquired = held.acquired();
    long oldestMillis = HeldRecords.heldMillis(oldest, now);
    try {
      for (HeldRecords.Held h : acquired) {
        consumer().acknowledge(h.record(), renew);
        held.renewing(h, now);
      }
    } catch (RuntimeException e) {
      renew = null;
      log.warn(
          "Kafka share source '{}' cannot renew acquisition locks ({}); records in flight past their lock are delivered again"
              + " and found duplicates",
          group, LogText.error(e));
      return;
    }
    // Out now, on an acknowledgement request: a poll would carry it too, but would also fetch.
    consumer().commitAsync();
    meters.renewed(acquired.size());
    String line = "Kafka share source '{}' renews the acquisition locks of {} records still in flight, the oldest ({}) for {} ms of"
        + " its {} ms lock";
    Object[] args = {group, acquired.size(), HeldRecords.Key.of(oldest.record()), oldestMillis,
        TimeUnit.NANOSECONDS.toMillis(lockNanos)};
    if (renewedBefore) {
      log.debug(line, args);
    } else {
      renewedBefore = true;
      log.info(line + " (handlers slower than half the group's share.record.lock.duration.ms; said once, then at DEBUG)", args);
    }
  }

  private void applyQueued() {
    for (ShareSettlement s = settlements.poll(); s != null; s = settlements.poll()) {
      apply(s);
    }
  }

  private void apply(ShareSettlement settlement) {
    HeldRecords.Held record = held.get(settlement.record());
    if (record == null) {
      settlement.sink().error(new IllegalStateException("record " + settlement.where()
          + " is not held by this share consumer; the broker delivers it again"));
      return;
    }
    if (record.state() == HeldRecords.State.RENEWING) {
      held.await(record, settlement);
      return;
    }
    held.remove(record);
    try {
      consumer().acknowledge(record.record(), settlement.type());
      settlement.sink().success();
    } catch (RuntimeException e) {
      settlement.sink().error(e);
    }
  }

  /** Forgets records whose lock this consumer lost; a settlement that waited for one fails: the broker delivers it again. */
  private void lost(List<HeldRecords.Held> records, String why) {
    if (records.isEmpty()) {
      return;
    }
    meters.lost(records.size());
    log.warn("Kafka share source '{}' lost the acquisition lock of {} records, for example {}: {}; the broker delivers them again"
        + " and the dedup table keeps each effect single", group, records.size(), HeldRecords.Key.of(records.get(0).record()),
        why);
    for (HeldRecords.Held h : records) {
      ShareSettlement waiting = held.takeWaiting(h);
      if (waiting != null) {
        waiting.sink().error(new IllegalStateException("record " + waiting.where() + " lost its acquisition lock (" + why
            + "); the broker delivers it again"));
      }
    }
  }

  /** The client's word on acknowledgements sent: answers renewals, and names what the broker refused. */
  private void committed(Map<TopicIdPartition, Set<Long>> offsets, Exception error) {
    List<HeldRecords.Held> renewals = new ArrayList<>();
    if (held.anyUnanswered()) {
      // Most answers are to acceptances; only look the offsets up while a renewal is out.
      offsets.forEach((partition, at) -> renewals.addAll(held.answered(partition.topic(), partition.partition(), at)));
    }
    if (error == null) {
      return;
    }
    boolean turnedOff = error instanceof UnsupportedVersionException && renew != null;
    if (turnedOff) {
      renew = null;
      log.warn("Kafka share source '{}': the broker does not support lock renewal (RENEW needs Kafka 4.2 brokers; {}); records in"
          + " flight past their lock are delivered again and found duplicates", group, LogText.error(error));
    }
    if (!renewals.isEmpty()) {
      // The client does not hand a refused renewal back: the broker delivers the record again.
      renewals.forEach(held::remove);
      lost(renewals, "the broker refused its renewal (" + LogText.error(error) + ")");
    }
    if (turnedOff || renewals.size() == offsets.values().stream().mapToInt(Set::size).sum()) {
      return;
    }
    log.warn("Kafka share source '{}': the broker refused acknowledgements of {} ({}); records whose acquisition lock ran out are"
        + " delivered again and found duplicates", group, offsets, LogText.error(error));
  }

  /** Releases the acquired records not settled, commits, closes; fails settlements that come later. */
  private void close() {
    try {
      if (consumer != null) {
        applyQueued();
        List<HeldRecords.Held> acquired = held.acquired();
        for (HeldRecords.Held h : acquired) {
          consumer.acknowledge(h.record(), AcknowledgeType.RELEASE);
        }
        int renewing = held.size() - acquired.size();
        for (HeldRecords.Held h : held.clear()) {
          ShareSettlement waiting = held.takeWaiting(h);
          if (waiting != null) {
            waiting.sink().error(new IllegalStateException("record " + waiting.where() + " was not settled: its share consumer"
                + " stopped while renewing its lock, and the broker delivers it again"));
          }
        }
        if (!acquired.isEmpty() || renewing > 0) {
          log.info("Kafka share source '{}' released {} unsettled records on stopping ({} more, whose lock renewal was under way,"
              + " return to the group as it leaves); the broker delivers them again", group, acquired.size(), renewing);
        }
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
      meters.unbind();
      done = true;
      refuseQueued();
      closed.complete(null);
    }
  }

  /** The consumer, which {@link #run()} creates before the loop calls anything that uses it. */
  private ShareConsumer<byte[], byte[]> consumer() {
    return Objects.requireNonNull(consumer, "created when the loop starts");
  }

  private void refuseQueued() {
    for (ShareSettlement s = settlements.poll(); s != null; s = settlements.poll()) {
      s.sink().error(new IllegalStateException("record " + s.where()
          + " was not settled: its share consumer has closed, and the broker delivers it again"));
    }
  }
}
