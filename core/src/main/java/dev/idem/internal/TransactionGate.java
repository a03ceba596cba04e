package dev.idem.internal;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * Lets units of work run side by side, or one alone: a reactive read-write lock without
 * blocking a thread. Work that runs alone waits until the work in flight ended, and nothing
 * starts while it runs. Waiters are served in arrival order, so work that waits to run alone
 * holds back the work that arrives after it and is not starved.
 *
 * <p>A unit leaves the gate when it ends by any signal, cancellation included; a unit cancelled
 * while it waits leaves the queue.
 */
public final class TransactionGate {

  private final ArrayDeque<Waiter> waiting = new ArrayDeque<>();
  private int running;
  private boolean alone;

  /**
   * Runs {@code work} through the gate.
   *
   * @param runAlone whether no other work may run meanwhile
   * @param work the unit of work, subscribed once it may run
   * @param <R> its value type
   * @return the work, deferred until the gate lets it in
   */
  public <R> Mono<R> run(boolean runAlone, Mono<R> work) {
    return Mono.defer(() -> {
      Waiter waiter = new Waiter(runAlone);
      return Mono.<Void>create(sink -> enter(waiter, sink)).then(work).doFinally(signal -> leave(waiter));
    });
  }

  /**
   * Whether some work runs alone or waits to.
   *
   * @return true while the gate is closed to work that arrives now
   */
  public synchronized boolean closed() {
    return alone || !waiting.isEmpty();
  }

  private void enter(Waiter waiter, MonoSink<Void> sink) {
    synchronized (this) {
      if (waiter.state != State.NEW) {
        return;
      }
      if (!waiting.isEmpty() || !mayEnter(waiter)) {
        waiter.sink = sink;
        waiter.state = State.WAITING;
        waiting.add(waiter);
        return;
      }
      admit(waiter);
    }
    sink.success();
  }

  private void leave(Waiter waiter) {
    List<MonoSink<Void>> admitted = new ArrayList<>();
    synchronized (this) {
      switch (waiter.state) {
        case WAITING -> waiting.remove(waiter);
        case RUNNING -> {
          if (waiter.alone) {
            alone = false;
          } else {
            running--;
          }
        }
        default -> {
        }
      }
      waiter.state = State.LEFT;
      while (!waiting.isEmpty() && mayEnter(waiting.peek())) {
        Waiter next = waiting.poll();
        admit(next);
        admitted.add(next.sink);
        next.sink = null;
      }
    }
    admitted.forEach(MonoSink::success);
  }

  private boolean mayEnter(Waiter waiter) {
    return !alone && (!waiter.alone || running == 0);
  }

  private void admit(Waiter waiter) {
    waiter.state = State.RUNNING;
    if (waiter.alone) {
      alone = true;
    } else {
      running++;
    }
  }

  private enum State {
    NEW, WAITING, RUNNING, LEFT
  }

  private static final class Waiter {
    final boolean alone;
    State state = State.NEW;
    @Nullable MonoSink<Void> sink;

    Waiter(boolean alone) {
      this.alone = alone;
    }
  }
}
