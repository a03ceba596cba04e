package dev.idem.internal;

import dev.idem.ShutdownReport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxOperator;
import reactor.core.publisher.Mono;
import reactor.core.publisher.SignalType;
import reactor.core.publisher.Sinks;
import reactor.util.context.Context;

/**
 * The graceful stop of one subscribed stream: which messages started, which are in flight, and
 * the signal that ends the stream once they finished or the grace period ran out.
 *
 * <p>A message is <em>started</em> when its processing begins (after its ordering lane let it);
 * from then on it is <em>in flight</em> until its processing terminates. After the stop no message
 * starts; the gate in front of the source stops requesting more. Batches count their messages.
 */
public final class StopControl {

  private static final Logger log = LoggerFactory.getLogger(StopControl.class);

  /** The reactor context key under which a message's {@link Flight} travels to its retry backoff. */
  private static final String FLIGHT_KEY = StopControl.class.getName() + ".flight";

  private final String consumer;
  private final Consumer<Object> notStarted;
  private final Consumer<StopControl> detach;
  /** The gate of the stream; it ends the stream's input at the stop. */
  private volatile @Nullable Gate<?> gate;
  /** Emitted when the grace period ran out: the stream completes then, drained or not. */
  private final Sinks.Empty<Void> graceOver = Sinks.empty();
  private final Sinks.One<ShutdownReport> report = Sinks.one();
  private final Set<Flight> flights = new HashSet<>();

  // guarded by this
  private volatile boolean stopping;
  private long stopAt;
  private Duration grace = Duration.ZERO;
  private long received;
  private long started;
  private int inFlight;
  private int completedAfterStop;
  private int abandonedAfterStop;
  private boolean graceExpired;
  private boolean terminated;
  private reactor.core.@Nullable Disposable graceTimer;

  /**
   * @param consumer the consumer name, for the log
   * @param notStarted told of each delivery that will not be started
   * @param detach called once when the stream terminated
   */
  public StopControl(String consumer, Consumer<Object> notStarted, Consumer<StopControl> detach) {
    this.consumer = consumer;
    this.notStarted = notStarted;
    this.detach = detach;
  }

  /**
   * The source, counted, and no longer requested from once the stop began. Items that arrive
   * after the stop (demand already granted) are dropped unstarted.
   *
   * @param source the source
   * @param <D> the item type
   * @return the gated source
   */
  public <D> Flux<D> gate(Publisher<? extends D> source) {
    return new FluxOperator<D, D>(Flux.from(source)) {
      @Override
      public void subscribe(CoreSubscriber<? super D> actual) {
        this.source.subscribe(new Gate<>(actual));
      }
    };
  }

  /**
   * One message's processing, started unless the stop began.
   *
   * @param item the message, told to the not-started callback when it does not start
   * @param work the processing
   * @param <R> its result
   * @return the work, or empty without running it after the stop
   */
  public <R> Mono<R> run(Object item, Mono<R> work) {
    return Mono.defer(() -> {
      Flight flight = tryStart(1);
      if (flight == null) {
        notStarted.accept(item);
        return Mono.empty();
      }
      return tracked(flight, work.flux()).singleOrEmpty();
    });
  }

  /**
   * A batch's processing, started unless the stop began. The work gets its lane back tracked: a
   * message that the batch moves off the lane ({@link LaneControl#offLane}) leaves the
   * batch's flight for a flight of its own, which a stop waits for within the grace period and
   * abandons a retry backoff of that ends after it, as for the batch; a message the lane holds back
   * ({@link LaneControl#admit}) leaves the flight unstarted, and starts again with a
   * later batch (or, once the stop began, is not started). So a batch's flight counts only the
   * messages it settles itself, and none is reported abandoned that another flight settled.
   *
   * @param items the batch's messages, each counted
   * @param lane the lane the batch runs on
   * @param work the processing on the tracked lane, emitting at most one result per message
   * @param <I> the lane's item type
   * @param <O> the lane's result type
   * @param <R> the result type
   * @return the work, or empty without running it after the stop
   */
  public <I, O, R> Flux<R> runBatch(List<?> items, LaneControl<I, O> lane,
      Function<LaneControl<I, O>, Flux<R>> work) {
    return Flux.defer(() -> {
      Flight flight = tryStart(items.size());
      if (flight == null) {
        items.forEach(notStarted);
        return Flux.empty();
      }
      return tracked(flight, work.apply(tracking(lane, flight)));
    });
  }

  /** The lane of a batch whose flight is {@code flight}: what leaves the batch leaves its flight. */
  private <I, O> LaneControl<I, O> tracking(LaneControl<I, O> lane, Flight flight) {
    return new LaneControl<>() {
      @Override
      public List<I> admit(List<I> items) {
        List<I> admitted = lane.admit(items);
        leave(flight, items.size() - admitted.size(), true);
        return admitted;
      }

      @Override
      public void offLane(I item, Mono<O> work) {
        leave(flight, 1, false);
        lane.offLane(item, continued(work));
      }
    };
  }

  /** {@code count} messages leave a batch's flight: off the lane (in flight on their own) or held back ({@code unstarted}). */
  private void leave(Flight flight, int count, boolean unstarted) {
    if (count <= 0) {
      return;
    }
    synchronized (this) {
      if (!flights.contains(flight)) {
        return;
      }
      flight.messages -= count;
      inFlight -= count;
      if (unstarted) {
        started -= count;
      }
    }
  }

  /** Work of a message that already started (in a batch that has not ended yet): in flight even when stopping. */
  private <R> Mono<R> continued(Mono<R> work) {
    return Mono.defer(() -> {
      Flight flight;
      synchronized (this) {
        inFlight += 1;
        flight = new Flight(1);
        flights.add(flight);
      }
      return tracked(flight, work.flux()).singleOrEmpty();
    });
  }

  /**
   * The work of one flight: its backoffs find the flight in the context, an abandoned flight is cut
   * off, and the flight is finished before its terminal signal travels on, so that a stream that
   * completes right after its last message (a source that completed) sees nothing in flight.
   */
  private <R> Flux<R> tracked(Flight flight, Flux<R> work) {
    return work.contextWrite(Context.of(FLIGHT_KEY, flight))
        .takeUntilOther(flight.abandon.asMono())
        .doOnNext(result -> flight.emitted++)
        .doOnComplete(() -> finish(flight, SignalType.ON_COMPLETE))
        .doOnError(error -> finish(flight, SignalType.ON_ERROR))
        .doOnCancel(() -> finish(flight, SignalType.CANCEL));
  }

  /**
   * The stream, completed normally once the stop is over, and reported.
   *
   * @param outcomes the stream
   * @param <O> the outcome type
   * @return the stream that completes after the stop
   */
  public <O> Flux<O> untilStopped(Flux<O> outcomes) {
    return outcomes.takeUntilOther(graceOver.asMono()).doFinally(this::terminated);
  }

  /**
   * A retry backoff: {@code Mono.delay(wait)}, except that a message of a stopping stream whose
   * backoff would end after the grace period is abandoned at once instead (no transaction is open
   * while it waits); one whose backoff ends within the grace period waits and tries again.
   *
   * @param wait the backoff
   * @return the delay
   */
  public static Mono<Long> backoff(Duration wait) {
    return Mono.deferContextual(context -> {
      Object flight = context.getOrDefault(FLIGHT_KEY, null);
      return flight instanceof Flight f ? f.sleep(wait) : Mono.delay(wait);
    });
  }

  /**
   * Tells whether the stop began.
   *
   * @return whether it began
   */
  public boolean isStopping() {
    return stopping;
  }

  /**
   * The report, once the stream terminated.
   *
   * @return the report
   */
  public Mono<ShutdownReport> report() {
    return report.asMono();
  }

  /**
   * Begins the stop: nothing starts any more, messages waiting in a backoff are abandoned, and the
   * stream ends when the rest finished or the grace period ran out.
   *
   * @param gracePeriod how long messages in flight may take
   */
  public void stop(Duration gracePeriod) {
    List<Flight> backingOff = new ArrayList<>();
    int running;
    synchronized (this) {
      if (stopping || terminated) {
        return;
      }
      stopping = true;
      stopAt = System.nanoTime();
      grace = gracePeriod;
      running = inFlight;
      for (Flight flight : flights) {
        if (flight.inBackoff && wakesAfterGrace(flight.wakeAt)) {
          backingOff.add(flight);
        }
      }
    }
    log.info("Consumer '{}' stopping gracefully: {} message(s) in flight ({} waiting in a retry backoff that ends after "
        + "the grace period, abandoned now), grace period {} ms; no new message starts",
        consumer, running, backingOff.size(), gracePeriod.toMillis());
    backingOff.forEach(Flight::abandon);
    synchronized (this) {
      graceTimer = Mono.delay(gracePeriod).subscribe(ignored -> graceRanOut());
    }
    // The input ends here; the stream completes once what is in flight has settled and every
    // outcome has travelled downstream. The source itself stays subscribed until then.
    Gate<?> input = gate;
    if (input != null) {
      input.end();
    }
  }

  /** Whether a backoff that ends at {@code wakeAt} ends after the grace period; only while stopping. */
  private boolean wakesAfterGrace(long wakeAt) {
    return wakeAt - (stopAt + saturatedNanos(grace)) > 0;
  }

  private static long saturatedNanos(Duration duration) {
    return duration.compareTo(Duration.ofDays(365 * 100)) > 0 ? Long.MAX_VALUE / 4 : duration.toNanos();
  }

  /**
   * Cuts off what is still in flight, then completes the stream even if outcomes still wait for
   * downstream demand (a subscriber that stopped requesting): the grace period bounds the stop.
   */
  private void graceRanOut() {
    int left;
    List<Flight> cut;
    synchronized (this) {
      if (terminated) {
        return;
      }
      left = inFlight;
      graceExpired = left > 0;
      cut = new ArrayList<>(flights);
    }
    if (left > 0) {
      log.info("Consumer '{}': the grace period ran out with {} message(s) in flight; cancelling them "
          + "(their transactions roll back, they stay unacknowledged)", consumer, left);
    } else {
      log.info("Consumer '{}': the grace period ran out with outcomes still waiting for downstream demand; "
          + "completing the stream without them (their messages are settled)", consumer);
    }
    cut.forEach(Flight::abandon);
    graceOver.tryEmitEmpty();
  }

  private synchronized @Nullable Flight tryStart(int messages) {
    if (stopping) {
      return null;
    }
    started += messages;
    inFlight += messages;
    Flight flight = new Flight(messages);
    flights.add(flight);
    return flight;
  }

  private void finish(Flight flight, SignalType signal) {
    synchronized (this) {
      if (!flights.remove(flight)) {
        return;
      }
      inFlight -= flight.messages;
      if (stopping) {
        // A batch emits one outcome per message it settled; the messages it moved off its lane
        // are counted by their own flight, those it held back when they start again.
        int emitted = Math.min(flight.emitted, flight.messages);
        completedAfterStop += emitted;
        if (signal == SignalType.CANCEL || flight.abandoned) {
          abandonedAfterStop += flight.messages - emitted;
        }
      }
    }
  }

  private void terminated(SignalType signal) {
    ShutdownReport result;
    boolean wasStopping;
    synchronized (this) {
      if (terminated) {
        return;
      }
      terminated = true;
      wasStopping = stopping;
      if (graceTimer != null) {
        graceTimer.dispose();
      }
      // Flights still registered were cut off with the stream (a cancel from downstream).
      for (Flight flight : flights) {
        abandonedAfterStop += wasStopping ? flight.messages - Math.min(flight.emitted, flight.messages) : 0;
      }
      flights.clear();
      long unstarted = Math.max(0, received - started);
      result = new ShutdownReport(completedAfterStop, abandonedAfterStop, (int) Math.min(Integer.MAX_VALUE, unstarted),
          !graceExpired, wasStopping ? Duration.ofNanos(System.nanoTime() - stopAt) : Duration.ZERO);
    }
    Gate<?> input = gate;
    if (input != null) {
      input.cancelSource();
    }
    detach.accept(this);
    if (wasStopping) {
      log.info("Consumer '{}' stopped ({}): {} in-flight message(s) completed, {} abandoned, {} received but not started, "
          + "{} the grace period of {} ms, took {} ms", consumer, signal, result.completedInFlight(), result.abandonedInFlight(),
          result.notStarted(), result.withinGracePeriod() ? "within" : "after", grace.toMillis(), result.took().toMillis());
    }
    report.tryEmitValue(result);
  }

  /** One message or batch in flight. */
  private final class Flight {
    /** Its messages still in flight with it; a batch's decrease as messages leave it (guarded by the control). */
    int messages;
    final Sinks.Empty<Void> abandon = Sinks.empty();
    volatile int emitted;
    volatile boolean inBackoff;
    /** When the current backoff ends ({@link System#nanoTime()}); meaningful while {@link #inBackoff}. */
    volatile long wakeAt;
    volatile boolean abandoned;

    Flight(int messages) {
      this.messages = messages;
    }

    Mono<Long> sleep(Duration wait) {
      return Mono.defer(() -> {
        boolean giveUp;
        synchronized (StopControl.this) {
          inBackoff = true;
          wakeAt = System.nanoTime() + saturatedNanos(wait);
          giveUp = stopping && wakesAfterGrace(wakeAt);
        }
        if (giveUp) {
          abandon();
          return Mono.<Long>never();
        }
        return Mono.delay(wait).doFinally(signal -> inBackoff = false);
      });
    }

    void abandon() {
      abandoned = true;
      abandon.tryEmitEmpty();
    }
  }

  /**
   * Counts what the source emits; stops requesting, and drops what arrives, once the stop began.
   * At the stop it completes its subscriber (serialized with the source's signals) while keeping
   * the source subscribed, so that acknowledgements of the messages in flight still reach the
   * broker; the source is cancelled when the stream terminated.
   */
  private final class Gate<D> implements CoreSubscriber<D>, Subscription {
    private final CoreSubscriber<? super D> actual;
    private final java.util.concurrent.atomic.AtomicBoolean ended = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile @Nullable Subscription upstream;

    Gate(CoreSubscriber<? super D> actual) {
      this.actual = reactor.core.publisher.Operators.serialize(actual);
    }

    @Override
    public Context currentContext() {
      return actual.currentContext();
    }

    @Override
    public void onSubscribe(Subscription s) {
      this.upstream = s;
      gate = this;
      actual.onSubscribe(this);
      if (stopping) {
        end();
      }
    }

    @Override
    public void onNext(D item) {
      boolean pass;
      synchronized (StopControl.this) {
        received++;
        pass = !stopping;
      }
      if (pass) {
        actual.onNext(item);
      } else {
        notStarted.accept(item);
      }
    }

    @Override
    public void onError(Throwable error) {
      if (ended.compareAndSet(false, true)) {
        actual.onError(error);
      }
    }

    @Override
    public void onComplete() {
      if (ended.compareAndSet(false, true)) {
        actual.onComplete();
      }
    }

    /** The stop: no more input for the pipeline. */
    void end() {
      if (ended.compareAndSet(false, true)) {
        actual.onComplete();
      }
    }

    void cancelSource() {
      Subscription s = upstream;
      if (s != null) {
        s.cancel();
      }
    }

    @Override
    public void request(long n) {
      if (!stopping) {
        Objects.requireNonNull(upstream).request(n);
      }
    }

    @Override
    public void cancel() {
      Objects.requireNonNull(upstream).cancel();
    }
  }
}
