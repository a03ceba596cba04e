package dev.idem.internal;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.MonoSink;

/**
 * An item submitted to {@link BatchLanes}, with its place in the arrival order and the sink its
 * result goes to. It ends once, by a result, an error or being abandoned; ending releases its key.
 *
 * @param <I> the item type
 * @param <O> the result type
 */
final class LaneItem<I, O> {
  final I item;
  /** The item's key, counted by the lanes until it ends; null for none. */
  @Nullable String key;
  final MonoSink<O> sink;
  /** Its place in the arrival order. */
  long seq;
  private final Consumer<String> releaseKey;
  private final Consumer<I> abandoned;
  private final AtomicBoolean done = new AtomicBoolean();

  LaneItem(I item, @Nullable String key, MonoSink<O> sink, Consumer<String> releaseKey, Consumer<I> abandoned) {
    this.item = item;
    this.key = key;
    this.sink = sink;
    this.releaseKey = releaseKey;
    this.abandoned = abandoned;
  }

  /** The item ended: it no longer holds its key on its lane. Once: false after the first call. */
  boolean leave() {
    if (!done.compareAndSet(false, true)) {
      return false;
    }
    if (key != null) {
      releaseKey.accept(key);
    }
    return true;
  }

  void succeed(O result) {
    leave();
    sink.success(result);
  }

  void succeed() {
    leave();
    sink.success();
  }

  void fail(Throwable error) {
    leave();
    sink.error(error);
  }

  void abandon() {
    if (leave()) {
      abandoned.accept(item);
      sink.success();
    }
  }
}
