package dev.idem.kafka.internal;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.scheduler.Schedulers;

/**
 * The consumers of a source whose subscription was cancelled and that are still committing and
 * closing on their own threads, so that closing the source can wait for them.
 */
final class ClosingConsumers {

  private static final Logger log = LoggerFactory.getLogger(ClosingConsumers.class);

  private final String source;
  private final Duration closeTimeout;
  private final Set<CompletableFuture<Void>> closing = ConcurrentHashMap.newKeySet();

  /**
   * @param source how the logs name the source, for example {@code Kafka source 'payments'}
   * @param closeTimeout how long one consumer may take to commit, and again to close
   */
  ClosingConsumers(String source, Duration closeTimeout) {
    this.source = source;
    this.closeTimeout = closeTimeout;
  }

  /** Tracks a consumer that was told to stop, until {@code closed} completes. */
  void stopping(CompletableFuture<Void> closed) {
    if (!closed.isDone()) {
      closing.add(closed);
      closed.whenComplete((ignored, error) -> closing.remove(closed));
    }
  }

  /** Waits for the tracked consumers, at most twice the close timeout and a second; not on a non-blocking thread. */
  void await() {
    if (closing.isEmpty()) {
      return;
    }
    if (Schedulers.isInNonBlockingThread()) {
      log.warn("{} closed on a non-blocking thread; not waiting for its cancelled consumers to commit and close", source);
      return;
    }
    try {
      CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(closeTimeout.toMillis() * 2 + 1_000,
          TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      log.warn("{}: its cancelled consumers did not close within {}", source, closeTimeout.multipliedBy(2));
    } catch (ExecutionException e) {
      log.warn("{}: a cancelled consumer failed while closing", source, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
