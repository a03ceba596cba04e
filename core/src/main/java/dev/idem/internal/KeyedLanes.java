package dev.idem.internal;

import java.util.concurrent.ConcurrentHashMap;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Serialises work per key without a {@code groupBy}: each unit of work waits for the previous
 * unit of the same key to finish, then runs. Units must be subscribed in the order they should
 * run (a {@code flatMap} does that).
 *
 * <p>Only keys with work in flight or waiting have an entry, so the map holds at most as many
 * entries as the caller lets units run at once.
 */
public final class KeyedLanes {

  private final ConcurrentHashMap<String, Mono<Void>> tails = new ConcurrentHashMap<>();

  /**
   * Runs {@code work} after every earlier unit of {@code key} finished (by any signal).
   *
   * @param key the serialisation key; {@code null} runs the work at once
   * @param work the unit of work
   * @param <R> its value type
   * @return the work, deferred behind its key's predecessors
   */
  public <R> Mono<R> run(String key, Mono<R> work) {
    if (key == null) {
      return work;
    }
    return Mono.defer(() -> {
      Sinks.Empty<Void> done = Sinks.empty();
      Mono<Void> tail = done.asMono();
      Mono<Void> previous = tails.put(key, tail);
      Mono<Void> turn = previous == null ? Mono.empty() : previous;
      return turn.then(work).doFinally(signal -> {
        tails.remove(key, tail);
        done.tryEmitEmpty();
      });
    });
  }

  /**
   * The number of keys with work in flight or waiting.
   *
   * @return the number of busy keys
   */
  public int busyKeys() {
    return tails.size();
  }
}
