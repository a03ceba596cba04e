package dev.idem.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import reactor.core.publisher.BaseSubscriber;

/**
 * The subscriber of one batch that a lane of {@link BatchLanes} runs. It hands each result to its
 * item as it arrives; when the batch ends it ends the items left without a result: on completion
 * with none, on an error with that error, and after completion it lets the lanes form their next
 * batches. It tells the {@link GroupCommit} once that the batch ended, however it ended.
 *
 * @param <I> the item type
 * @param <O> the result type
 */
final class BatchRun<I, O> extends BaseSubscriber<O> {

  /** The lane's lock, which also guards {@link #waiting}. */
  private final Object lane;
  /** The batch's items that still wait for a result. */
  private final Map<I, LaneItem<I, O>> waiting;
  private final Function<O, I> itemOf;
  private final GroupCommit group;
  private final Runnable completed;
  private final AtomicBoolean ended = new AtomicBoolean();

  /**
   * @param lane the lane's lock, held while {@code waiting} is read or changed
   * @param waiting the batch's items by item, which the lane may also change (under its lock)
   * @param itemOf the item a result belongs to
   * @param group told when the batch started (by the lane) and ended (here)
   * @param completed runs after a completed batch ended its items: the lanes look for their next batches
   */
  BatchRun(Object lane, Map<I, LaneItem<I, O>> waiting, Function<O, I> itemOf, GroupCommit group, Runnable completed) {
    this.lane = lane;
    this.waiting = waiting;
    this.itemOf = itemOf;
    this.group = group;
    this.completed = completed;
  }

  @Override
  protected void hookOnNext(O result) {
    LaneItem<I, O> p;
    synchronized (lane) {
      p = waiting.remove(itemOf.apply(result));
    }
    if (p != null) {
      p.succeed(result);
    }
  }

  @Override
  protected void hookOnError(Throwable error) {
    end();
    for (LaneItem<I, O> p : takeAll()) {
      p.fail(error);
    }
  }

  @Override
  protected void hookOnComplete() {
    end();
    for (LaneItem<I, O> p : takeAll()) {
      p.succeed();
    }
    completed.run();
  }

  @Override
  protected void hookOnCancel() {
    end();
  }

  private void end() {
    if (ended.compareAndSet(false, true)) {
      group.ended();
    }
  }

  private List<LaneItem<I, O>> takeAll() {
    synchronized (lane) {
      List<LaneItem<I, O>> left = new ArrayList<>(waiting.values());
      waiting.clear();
      return left;
    }
  }
}
