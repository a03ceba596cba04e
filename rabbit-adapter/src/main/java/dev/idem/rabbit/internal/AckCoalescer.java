package dev.idem.rabbit.internal;

import com.rabbitmq.client.Channel;
import dev.idem.internal.JvmErrors;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;

/**
 * Sends acknowledgements asked for together as few {@code basic.ack} frames as the broker's
 * semantics allow, without delaying any of them.
 *
 * <p>Every ack is queued and the queue is drained on the settling thread: whatever is queued when
 * a drain runs goes out in that drain, so nothing waits for more acks to arrive. Of the acks of
 * one drain on one channel, those that are the channel's lowest outstanding deliveries (no
 * delivery of a lower tag left unsettled on it) go out as one {@code basic.ack} with
 * {@code multiple} set, at the highest of their tags; each other one goes out alone. So a
 * multiple ack never covers a delivery that was not asked to be acknowledged: the
 * {@link ConsumerSession} knows every delivery its channel received and not yet settled, and a
 * delivery held back (a slow handler, a retry, an unreadable message left unacknowledged) stops
 * the run of lowest tags where it stands.
 *
 * <p>Each ack's {@link Mono} completes once the frame that carries it is written, and fails as
 * the single ack did: a channel that is gone (the broker redelivers the message) or a frame that
 * could not be written fails every ack it carried, which count as unsettled again while their
 * channel is open.
 */
final class AckCoalescer {

  private final Scheduler settling;
  private final Queue<Pending> queue = new ConcurrentLinkedQueue<>();
  private final AtomicInteger wip = new AtomicInteger();
  private final AtomicLong frames = new AtomicLong();
  private final AtomicLong acks = new AtomicLong();

  /**
   * Creates a coalescer.
   *
   * @param settling the single thread that settles the source's deliveries
   */
  AckCoalescer(Scheduler settling) {
    this.settling = settling;
  }

  /** Acknowledges one delivery on its own channel; completes once a frame carrying it is written. */
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

  /** Deliveries acknowledged so far. */
  long acks() {
    return acks.get();
  }

  private void drain() {
    int missed = 1;
    while (true) {
      List<Pending> drained = new ArrayList<>();
      for (Pending p = queue.poll(); p != null; p = queue.poll()) {
        drained.add(p);
      }
      if (!drained.isEmpty()) {
        send(drained);
      }
      missed = wip.addAndGet(-missed);
      if (missed == 0) {
        return;
      }
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
    Channel channel = session.channel();
    if (!channel.isOpen()) {
      for (Pending p : pending) {
        p.delivery.release();
        p.sink.error(new SettlementException("ack of message '" + p.delivery.idForLogs() + "' failed: its channel is gone"
            + " and the broker will redeliver the message", null));
      }
      return;
    }
    pending.sort(Comparator.comparingLong(p -> p.tag()));
    int lowest = lowestOutstanding(session.outstandingTags(), pending);
    if (lowest > 0) {
      frame(session, pending.subList(0, lowest), lowest > 1);
    }
    for (int i = lowest; i < pending.size(); i++) {
      frame(session, pending.subList(i, i + 1), false);
    }
  }

  /**
   * How many of {@code sorted} (acks in ascending tag order) are the channel's lowest
   * outstanding deliveries: the length of the run they share with the start of
   * {@code outstanding} (the channel's unsettled tags, ascending). A repeated tag ends the run.
   */
  static int lowestOutstanding(Iterator<Long> outstanding, List<Pending> sorted) {
    int run = 0;
    while (run < sorted.size() && outstanding.hasNext() && outstanding.next() == sorted.get(run).tag()) {
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
      for (Pending p : carried) {
        p.sink.error(fatal != null ? new JvmErrors.Signalled(fatal) : new SettlementException("ack of message '"
            + p.delivery.idForLogs() + "' failed; the broker will redeliver the message", e));
      }
      return;
    }
    frames.incrementAndGet();
    acks.addAndGet(carried.size());
    for (Pending p : carried) {
      session.settled(p.tag());
      p.sink.success();
    }
  }

  /** An ack asked for and not yet sent. */
  record Pending(RabbitDelivery<?> delivery, MonoSink<Void> sink) {
    long tag() {
      return delivery.envelope().getDeliveryTag();
    }
  }
}
