package dev.idem.pipeline;

import dev.idem.pipeline.PipelineFailures.SlowEffect;
import java.time.Duration;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;

/**
 * Watches the per-message handlers of one batch transaction attempt: once one of them has run
 * for the {@code slowMessageThreshold}, {@link #slow()} fires and names it, so that the attempt is
 * cancelled and the batch splits around that message ({@link SlowEffect}). One timer per attempt,
 * armed when the first handler starts and re-armed for the handler that runs then; no timer per
 * message. Not reusable: one per attempt.
 */
final class SlowEffectWatch {

  private static final int NONE = -1;

  private final long thresholdNanos;
  private final Sinks.Empty<Void> fired = Sinks.empty();
  private volatile int running = NONE;
  private volatile long since;
  private volatile boolean finished;
  private volatile int slowIndex = NONE;
  private volatile long slowFor;
  private @Nullable Disposable timer;

  SlowEffectWatch(Duration threshold) {
    this.thresholdNanos = threshold.toNanos();
  }

  /** The handler of the message at {@code index} starts (called in order, one at a time). */
  void started(int index) {
    since = System.nanoTime();
    running = index;
    synchronized (this) {
      if (timer == null && !finished) {
        arm(thresholdNanos);
      }
    }
  }

  /** The handlers are done (or the attempt ended): nothing more to watch. */
  void finished() {
    finished = true;
    running = NONE;
    Disposable t;
    synchronized (this) {
      t = timer;
    }
    if (t != null) {
      t.dispose();
    }
  }

  /** Completes when a handler has run for the threshold; never when none does. */
  Mono<Void> slow() {
    return fired.asMono();
  }

  /** What {@link #slow()} found, for the attempt's error. */
  SlowEffect failure() {
    return new SlowEffect(slowIndex, Duration.ofNanos(slowFor));
  }

  private void arm(long delayNanos) {
    try {
      timer = Schedulers.parallel().schedule(this::check, delayNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      // No scheduler (it was shut down): the transactionTimeout still bounds the attempt.
      timer = reactor.core.Disposables.disposed();
    }
  }

  private void check() {
    if (finished) {
      return;
    }
    int index = running;
    long ran = System.nanoTime() - since;
    if (index != NONE && ran >= thresholdNanos) {
      slowIndex = index;
      slowFor = ran;
      fired.tryEmitEmpty();
      return;
    }
    synchronized (this) {
      if (!finished) {
        arm(index == NONE ? thresholdNanos : thresholdNanos - ran);
      }
    }
  }
}
