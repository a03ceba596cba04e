package dev.idem.rabbit.internal;

import com.rabbitmq.client.Channel;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Queue;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;

/**
 * Sends acknowledgements as few {@code basic.ack} frames as the broker's semantics allow: one
 * {@code basic.ack} with {@code multiple} set up to the channel's contiguous settled watermark.
 *
 * <p>Every ack is queued and the queue is drained on the settling thread. A drained ack whose
 * delivery is the channel's lowest outstanding one (no delivery of a lower tag left unsettled on
 * it), together with every ack held above it that it makes contiguous, goes out at once as one
 * frame at the highest of their tags. An ack above a delivery that is still unsettled (in another
 * lane's transaction, a slow handler, a retry) is <em>held</em>: it waits for the deliveries below
 * it so that one multiple ack carries them all. A held ack waits at most {@code maxHold}, and a
 * channel holds at most {@code maxHeld} of them (a share of its prefetch: held acks use the
 * broker's window); past either bound the held acks go out one frame each, as they would without
 * coalescing. A multiple ack never covers a delivery that was not asked to be acknowledged: the
 * {@link ConsumerSession} knows every delivery its channel received and not yet settled.
 *
 * <p>Each ack's {@link Mono} completes once the frame that carries it is written or once it is
 * held, whichever comes first: a held ack is the coalescer's to send, and the pipeline's lane goes
 * on. A held ack is sent before its channel closes on a stop ({@link #flush(ConsumerSession)});
 * if the channel is lost first, the broker redelivers the message and the consumer's dedup
 * acknowledges the copy without a second effect, as for an ack frame lost on the wire. An ack that
 * is not held fails as the single ack did: a channel that is gone or a frame that could not be
 * written fails every unheld ack it carried, which count as unsettled again while their channel is
 * open.
 */
final class AckCoalescer {

  private static final Logger log = LoggerFactory.getLogger(AckCoalescer.class);

  /** Default longest wait of a held ack for the deliveries below it: {@value} ms. */
  static final long DEFAULT_MAX_HOLD_MILLIS = 200;

  private final Scheduler settling;
  private final int maxHeld;
  private final long maxHoldNanos;
  private final Queue<Pending> queue = new ConcurrentLinkedQueue<>();
  private final AtomicInteger wip = new AtomicInteger();
  private final AtomicLong frames = new AtomicLong();
  private final AtomicLong acks = new AtomicLong();
  /** Held acks per channel, by tag; read and written on the settling thread only. */
  private final Map<ConsumerSession, NavigableMap<Long, Pending>> held = new HashMap<>();
  /** Whether a check of held acks' age is scheduled; settling thread only. */
  private boolean ageCheckScheduled;

  /**
   * Creates a coalescer.
   *
   * @param settling the single thread that settles the source's deliveries
   * @param maxHeld the most acks one channel holds back at once, at least 1
   * @param maxHold the longest a held ack waits for the deliveries below it
   */
  AckCoalescer(Scheduler settling, int maxHeld, Duration maxHold) {
    this.settling = settling;
    this.maxHeld = Math.max(1, maxHeld);
    this.maxHoldNanos = maxHold.toNanos();
  }

  /** Acknowledges one delivery on its own channel; completes once a frame carrying it is written or it is held. */
  Mono<Void> ack(RabbitDelivery<?> delivery) {
    return Mono.create(sink -> {
      queue.offer(new Pending(delivery, sink));
      if (wip.getAndIncrement() == 0) {
        try {
          settling.schedule(this::drain);
        } catch (RejectedExecutionException e) {
          refuseAll();
        }
      }
    });
  }

  /** {@code basic.ack} frames sent so far. */
  long frames() {
    return frames.get();
  }

  /** Deliveries acknowledged so far (frames written). */
  long acks() {
    return acks.get();
  }

  /**
   * A delivery of {@code session} was settled otherwise (rejected, or acknowledged after its dead
   * letter): the watermark may have moved, so the acks held above it may go out. Settling thread.
   */
  void settledOtherwise(ConsumerSession session) {
    NavigableMap<Long, Pending> mine = held.get(session);
    if (mine != null && !mine.isEmpty()) {
      sendRun(session, mine);
      forgetIfEmpty(session, mine);
    }
  }

  /**
   * Sends every ack {@code session} holds, before its channel closes: as one multiple ack where
   * they are contiguous from the watermark, else one frame each. Runs on the settling thread and
   * completes once they are written; completes at once when the settling thread is gone.
   */
  Mono<Void> flush(ConsumerSession session) {
    return onSettlingThread(() -> {
      drainNow();
      sendAllHeld(session);
    });
  }

  /** Like {@link #flush(ConsumerSession)}, for every channel: before the connection closes. */
  Mono<Void> flushAll() {
    return onSettlingThread(() -> {
      drainNow();
      List.copyOf(held.keySet()).forEach(this::sendAllHeld);
    });
  }

  private Mono<Void> onSettlingThread(Runnable work) {
    return Mono.<Void>fromRunnable(work).subscribeOn(settling).onErrorResume(RejectedExecutionException.class, e -> Mono.empty());
  }

  /** Sends every ack {@code session} holds: the contiguous run as one frame, the rest one frame each. */
  private void sendAllHeld(ConsumerSession session) {
    NavigableMap<Long, Pending> mine = held.remove(session);
    if (mine != null) {
      sendRun(session, mine);
      sendEach(session, mine);
    }
  }

  private void drain() {
    int missed = 1;
    while (true) {
      drainNow();
      missed = wip.addAndGet(-missed);
      if (missed == 0) {
        return;
      }
    }
  }

  private void drainNow() {
    List<Pending> drained = new ArrayList<>();
    for (Pending p = queue.poll(); p != null; p = queue.poll()) {
      drained.add(p);
    }
    if (!drained.isEmpty()) {
      send(drained);
    }
  }

  /** The settling thread is gone (the source closed): every queued ack fails. */
  private void refuseAll() {
    int missed = 1;
    while (true) {
      for (Pending p = queue.poll(); p != null; p = queue.poll()) {
        p.sink.error(new SettlementException("ack of message '" + p.delivery.idForLogs() + "' not sent: the source is closed"
            + " and the broker will redeliver the message", null));
      }
      missed = wip.addAndGet(-missed);
      if (missed == 0) {
        return;
      }
    }
  }

  private void send(List<Pending> drained) {
    Map<ConsumerSession, List<Pending>> bySession = new LinkedHashMap<>();
    for (Pending p : drained) {
      bySession.computeIfAbsent(p.delivery.session(), s -> new ArrayList<>()).add(p);
    }
    bySession.forEach(this::sendOnChannel);
  }

  private void sendOnChannel(ConsumerSession session, List<Pending> pending) {
    NavigableMap<Long, Pending> mine = held.computeIfAbsent(session, s -> new TreeMap<>());
    if (!session.channel().isOpen()) {
      // The broker took back every delivery of the channel; held acks (already accepted) go with them.
      for (Pending p : pending) {
        p.delivery.release();
        p.sink.error(new SettlementException("ack of message '" + p.delivery.idForLogs() + "' failed: its channel is gone"
            + " and the broker will redeliver the message", null));
      }
      droppedWithClosedChannel(session, mine);
      held.remove(session);
      return;
    }
    long now = System.nanoTime();
    for (Pending p : pending) {
      p.heldSince = now;
      Pending earlier = mine.put(p.tag(), p);
      if (earlier != null && earlier != p) {
        // The delivery settles once (AbstractDelivery), so this does not happen; if it did, the
        // earlier ack's Mono must not be left pending: the new one carries the tag.
        earlier.accept();
      }
    }
    sendRun(session, mine);
    if (mine.size() >= maxHeld) {
      sendEach(session, mine);
    }
    // The drained acks still held are accepted; those already sent were accepted by their frame.
    for (Pending p : pending) {
      if (mine.get(p.tag()) == p) {
        p.accept();
      }
    }
    if (!mine.isEmpty()) {
      scheduleAgeCheck();
    }
    forgetIfEmpty(session, mine);
  }

  /** Sends the held acks that are contiguous from the channel's watermark as one frame. */
  private void sendRun(ConsumerSession session, NavigableMap<Long, Pending> mine) {
    if (droppedWithClosedChannel(session, mine)) {
      return;
    }
    int run = lowestOutstanding(session.outstandingTags(), mine.values().iterator());
    if (run == 0) {
      return;
    }
    List<Pending> carried = new ArrayList<>(run);
    Iterator<Pending> it = mine.values().iterator();
    for (int i = 0; i < run; i++) {
      carried.add(it.next());
      it.remove();
    }
    frame(session, carried, run > 1);
  }

  /**
   * Whether the channel closed with acks held for it: the broker took its deliveries back and
   * redelivers them (their copies are acknowledged as duplicates), so the held acks are dropped,
   * with one log line.
   */
  private boolean droppedWithClosedChannel(ConsumerSession session, NavigableMap<Long, Pending> mine) {
    if (mine.isEmpty() || session.channel().isOpen()) {
      return false;
    }
    List<String> ids = new ArrayList<>(mine.size());
    for (Pending p : mine.values()) {
      p.delivery.release();
      ids.add(p.delivery.idForLogs());
    }
    mine.clear();
    log.info("The channel of {} ack(s) held for coalescing closed ({}); the broker redelivers those messages and their copies"
        + " will be acknowledged as duplicates", ids.size(), describe(ids));
    return true;
  }

  /** The first few ids, for a log line. */
  private static String describe(List<String> ids) {
    int shown = Math.min(ids.size(), 5);
    return ids.subList(0, shown).stream().map(id -> "'" + id + "'").collect(Collectors.joining(", "))
        + (ids.size() > shown ? " and " + (ids.size() - shown) + " more" : "");
  }

  /** Sends every held ack of the channel, one frame each. */
  private void sendEach(ConsumerSession session, NavigableMap<Long, Pending> mine) {
    if (droppedWithClosedChannel(session, mine)) {
      return;
    }
    List<Pending> all = new ArrayList<>(mine.values());
    mine.clear();
    for (Pending p : all) {
      frame(session, List.of(p), false);
    }
  }

  private void forgetIfEmpty(ConsumerSession session, NavigableMap<Long, Pending> mine) {
    if (mine.isEmpty()) {
      held.remove(session);
    }
  }

  private void scheduleAgeCheck() {
    if (ageCheckScheduled) {
      return;
    }
    try {
      settling.schedule(this::checkAge, Math.max(1, maxHoldNanos), TimeUnit.NANOSECONDS);
      ageCheckScheduled = true;
    } catch (RejectedExecutionException e) {
      // the source is closing: its channels close and the broker redelivers what they held
    }
  }

  /** Sends, one frame each, the held acks of every channel whose oldest held ack waited {@code maxHold}. */
  private void checkAge() {
    ageCheckScheduled = false;
    long now = System.nanoTime();
    for (ConsumerSession session : List.copyOf(held.keySet())) {
      NavigableMap<Long, Pending> mine = Objects.requireNonNull(held.get(session), "only this loop removes its own session");
      sendRun(session, mine);
      long oldest = Long.MAX_VALUE;
      for (Pending p : mine.values()) {
        oldest = Math.min(oldest, p.heldSince);
      }
      if (!mine.isEmpty() && now - oldest >= maxHoldNanos) {
        sendEach(session, mine);
      }
      forgetIfEmpty(session, mine);
    }
    if (!held.isEmpty()) {
      scheduleAgeCheck();
    }
  }

  /**
   * How many of {@code sorted} (acks in ascending tag order) are the channel's lowest
   * outstanding deliveries: the length of the run they share with the start of
   * {@code outstanding} (the channel's unsettled tags, ascending).
   */
  static int lowestOutstanding(Iterator<Long> outstanding, Iterator<Pending> sorted) {
    int run = 0;
    while (sorted.hasNext() && outstanding.hasNext() && outstanding.next() == sorted.next().tag()) {
      run++;
    }
    return run;
  }

  /** One {@code basic.ack} for {@code carried}: the highest tag, with {@code multiple} when it carries several. */
  private void frame(ConsumerSession session, List<Pending> carried, boolean multiple) {
    List<Pending> released = new ArrayList<>(carried.size());
    for (Pending p : carried) {
      if (p.delivery.release()) {
        released.add(p);
      }
    }
    Channel channel = session.channel();
    try {
      channel.basicAck(carried.get(carried.size() - 1).tag(), multiple);
    } catch (Throwable e) {
      // The client runs the user's hooks (metrics and observation collectors) here: Errors too.
      if (channel.isOpen()) {
        released.forEach(p -> p.delivery.restore());
      }
      Error fatal = JvmErrors.fatalIn(e);
      List<String> heldIds = new ArrayList<>();
      for (Pending p : carried) {
        if (p.accepted()) {
          heldIds.add(p.delivery.idForLogs());
        } else {
          p.sink.error(fatal != null
              ? new JvmErrors.Signalled(fatal)
              : new SettlementException("ack of message '"
                  + p.delivery.idForLogs() + "' failed; the broker will redeliver the message", e));
        }
      }
      if (!heldIds.isEmpty()) {
        log.warn("Ack of {} message(s) held for coalescing failed ({}); the broker will redeliver them and their copies"
            + " will be acknowledged as duplicates: {}", heldIds.size(), describe(heldIds), LogText.error(e));
      }
      return;
    }
    frames.incrementAndGet();
    acks.addAndGet(carried.size());
    for (Pending p : carried) {
      session.settled(p.tag());
      p.accept();
    }
  }

  /** An ack asked for and not yet sent; its state is read and written on the settling thread only. */
  static final class Pending {
    private final RabbitDelivery<?> delivery;
    private final MonoSink<Void> sink;
    private long heldSince;
    private boolean accepted;

    Pending(RabbitDelivery<?> delivery, MonoSink<Void> sink) {
      this.delivery = delivery;
      this.sink = sink;
    }

    long tag() {
      return delivery.envelope().getDeliveryTag();
    }

    /** Completes the ack's {@link Mono}, once: its frame is written or the coalescer holds it. */
    void accept() {
      if (!accepted) {
        accepted = true;
        sink.success();
      }
    }

    boolean accepted() {
      return accepted;
    }
  }
}
