package dev.idem.kafka.internal;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jspecify.annotations.Nullable;

/**
 * The records one share consumer holds an acquisition lock on, and where each stands: acquired
 * (the client lets the loop acknowledge it) or renewing (a {@code RENEW} was sent; once the broker
 * has answered it, the client hands the record back in the next poll, and only then may it be
 * acknowledged again). A settlement that comes while its record is renewing waits here until the
 * record is back. Confined to the loop's thread.
 */
final class HeldRecords {

  /** Where a record stands with the client. */
  enum State {
    ACQUIRED, RENEWING
  }

  /** A held record: the client's latest copy, its state, and a settlement waiting for it. */
  static final class Held {
    private ConsumerRecord<byte[], byte[]> record;
    private final int deliveryCount;
    private State state = State.ACQUIRED;
    /** When the lock was last taken or renewed ({@link System#nanoTime()}). */
    private long lockedAt;
    private @Nullable ShareSettlement waiting;

    private Held(ConsumerRecord<byte[], byte[]> record, int deliveryCount, long now) {
      this.record = record;
      this.deliveryCount = deliveryCount;
      this.lockedAt = now;
    }

    ConsumerRecord<byte[], byte[]> record() {
      return record;
    }

    State state() {
      return state;
    }

    /** When the lock was last taken or renewed ({@link System#nanoTime()}). */
    long lockedAt() {
      return lockedAt;
    }

    /** The settlement that came while the record was renewing, or null. */
    @Nullable
    ShareSettlement waiting() {
      return waiting;
    }
  }

  /** Where a record's offset is, and so which of the held records a settlement or a poll means. */
  record Key(String topic, int partition, long offset) {
    static Key of(ConsumerRecord<?, ?> record) {
      return new Key(record.topic(), record.partition(), record.offset());
    }

    @Override
    public String toString() {
      return topic + "-" + partition + "@" + offset;
    }
  }

  /** What a poll brought: records to hand downstream, and renewed records with a settlement to apply now. */
  record Polled(List<ConsumerRecord<byte[], byte[]>> fresh, List<Held> returned, List<Held> lost) {}

  private final Map<Key, Held> held = new LinkedHashMap<>();
  /** Renewals sent and not answered yet, with when each was sent. */
  private final Map<Key, Long> unanswered = new HashMap<>();

  /**
   * Takes a poll's records: a record that comes back from a renewal (same offset, same delivery
   * count) is acquired again; any other record is fresh. A renewing record delivered again with a
   * higher count lost its lock on the way and is replaced by the new delivery.
   */
  Polled absorb(Iterable<ConsumerRecord<byte[], byte[]>> records, long now) {
    List<ConsumerRecord<byte[], byte[]>> fresh = new ArrayList<>();
    List<Held> returned = new ArrayList<>();
    List<Held> lost = new ArrayList<>();
    for (ConsumerRecord<byte[], byte[]> record : records) {
      Key key = Key.of(record);
      int count = ShareClients.deliveryCount(record);
      Held known = held.get(key);
      if (known != null && known.state == State.RENEWING && known.deliveryCount == count) {
        known.record = record;
        known.state = State.ACQUIRED;
        known.lockedAt = now;
        if (known.waiting != null) {
          returned.add(known);
        }
        continue;
      }
      if (known != null) {
        lost.add(known);
      }
      held.put(key, new Held(record, count, now));
      fresh.add(record);
    }
    return new Polled(fresh, returned, lost);
  }

  /** The held record a settlement means: same offset and same delivery, or null. */
  @Nullable
  Held get(ConsumerRecord<?, ?> record) {
    Held h = held.get(Key.of(record));
    return h != null && h.deliveryCount == ShareClients.deliveryCount(record) ? h : null;
  }

  /** Forgets a record once it is settled, or once its lock is lost. */
  void remove(Held record) {
    held.remove(Key.of(record.record));
  }

  /** Keeps a settlement until its renewing record is back. */
  void await(Held record, ShareSettlement settlement) {
    record.waiting = settlement;
  }

  /** Takes the settlement a returned record waited with. */
  @Nullable
  ShareSettlement takeWaiting(Held record) {
    ShareSettlement settlement = record.waiting;
    record.waiting = null;
    return settlement;
  }

  /** Whether a record the client lets the loop acknowledge has no acknowledgement yet: then the loop may not poll. */
  boolean anyAcquired() {
    for (Held h : held.values()) {
      if (h.state == State.ACQUIRED) {
        return true;
      }
    }
    return false;
  }

  boolean anyRenewing() {
    for (Held h : held.values()) {
      if (h.state == State.RENEWING) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a renewal is still unanswered. A poll made then would make the client fetch new records
   * into its buffer, where nobody renews them, so the loop waits for the answers first. A renewal
   * counts until the broker answers it, even once its record is given up ({@link #dropOverdue}):
   * the client keeps it until then.
   */
  boolean anyUnanswered() {
    return !unanswered.isEmpty();
  }

  /**
   * Stops waiting for renewals sent before {@code sentBefore} ({@link System#nanoTime()}); the
   * client answers every renewal within its request timeouts, so this is a last resort.
   *
   * @return how many renewals were given up
   */
  int forgetUnansweredSentBefore(long sentBefore) {
    int before = unanswered.size();
    unanswered.values().removeIf(sentAt -> sentAt - sentBefore < 0);
    return before - unanswered.size();
  }

  /**
   * Takes the broker's answer to renewals at these offsets.
   *
   * @return the renewing records answered (a renewal whose record was given up has none)
   */
  List<Held> answered(String topic, int partition, Iterable<Long> offsets) {
    List<Held> answered = new ArrayList<>();
    for (long offset : offsets) {
      Key key = new Key(topic, partition, offset);
      if (unanswered.remove(key) != null) {
        Held h = held.get(key);
        if (h != null && h.state == State.RENEWING) {
          answered.add(h);
        }
      }
    }
    return answered;
  }

  boolean isEmpty() {
    return held.isEmpty();
  }

  int size() {
    return held.size();
  }

  /** The acquired record whose lock was taken longest ago, or null. */
  @Nullable
  Held oldestAcquired() {
    Held oldest = null;
    for (Held h : held.values()) {
      if (h.state == State.ACQUIRED && (oldest == null || h.lockedAt < oldest.lockedAt)) {
        oldest = h;
      }
    }
    return oldest;
  }

  static long heldMillis(Held record, long now) {
    return TimeUnit.NANOSECONDS.toMillis(now - record.lockedAt);
  }

  /** Marks an acquired record renewing, once the client has its {@code RENEW}. */
  void renewing(Held record, long now) {
    record.state = State.RENEWING;
    record.lockedAt = now;
    unanswered.put(Key.of(record.record), now);
  }

  /**
   * Forgets renewing records that did not come back within {@code lockNanos} of their renewal (the
   * broker refused the renewal, or the lock ran out first): the broker delivers them again.
   */
  List<Held> dropOverdue(long now, long lockNanos) {
    List<Held> dropped = new ArrayList<>();
    for (Iterator<Held> it = held.values().iterator(); it.hasNext();) {
      Held h = it.next();
      if (h.state == State.RENEWING && now - h.lockedAt > lockNanos) {
        it.remove();
        dropped.add(h);
      }
    }
    return dropped;
  }

  /** The acquired records, to release on a stop; the renewing ones return to the group when the consumer leaves. */
  List<Held> acquired() {
    List<Held> acquired = new ArrayList<>();
    for (Held h : held.values()) {
      if (h.state == State.ACQUIRED) {
        acquired.add(h);
      }
    }
    return acquired;
  }

  /** Everything still held, waiting settlements included; forgotten after. */
  List<Held> clear() {
    List<Held> all = new ArrayList<>(held.values());
    held.clear();
    unanswered.clear();
    return all;
  }
}
