package dev.idem.pipeline;

import dev.idem.Delivery;
import dev.idem.RetryPolicy;
import dev.idem.internal.LogText;
import dev.idem.internal.TransactionGate;
import io.r2dbc.spi.R2dbcException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * Resolves deadlocks between the consumer's own transactions (SQLSTATE {@value #DEADLOCK})
 * without paying PostgreSQL's {@code deadlock_timeout} (1 s by default) again and again. Every
 * transaction attempt of the consumer, in both modes, passes its gate; most run side by side.
 *
 * <p>What it guarantees, for one consumer instance (all the streams of one
 * {@link IdempotentConsumer}):
 * <ul>
 *   <li><b>A deadlocked transaction is retried alone.</b> After an attempt of a message (or of a
 *       batch) failed with a deadlock, each further attempt of it waits until no other
 *       transaction of the consumer runs, and no other starts until it ended. A deadlock needs
 *       two transactions that wait for each other, so the retry cannot deadlock with the
 *       consumer's transactions: a message deadlocks with them at most once. (A deadlock
 *       with another writer of the database, another instance of the consumer included, stays
 *       possible; it is retried alone as contention, up to {@link RetryPolicy#maxContentionRetries()}.)</li>
 *   <li><b>Keys that deadlocked keep away from the others for a while.</b> The ordering keys of
 *       the messages of a deadlocked transaction are remembered for {@link #KEY_MEMORY}
 *       (30 s) after their last deadlock; meanwhile every transaction with a message of such a
 *       key runs alone too. The handlers that lock in conflicting orders stop meeting, so the
 *       number of deadlocks grows with the keys involved, not with the messages. Messages
 *       without an ordering key are only retried alone.</li>
 *   <li><b>Order and settlement are untouched.</b> The retry runs where the attempt ran: on its
 *       lane (batch mode) or in its key's turn (per-message mode), so that no later message of
 *       its key overtakes it; the gate only decides when an attempt starts, and acknowledgements
 *       still follow the commit.</li>
 *   <li><b>Operators see it.</b> Every deadlock is logged at WARN with its SQLSTATE, the ids of
 *       the messages of the deadlocked transaction and what the consumer does about it.</li>
 * </ul>
 * The price: while a transaction runs alone the consumer's other transactions wait (for at
 * most the time it takes, bounded by the {@code transactionTimeout}), and it waits for the
 * transactions in flight to end before it starts.
 */
final class DeadlockRecovery {

  /** The SQLSTATE of a deadlock. */
  static final String DEADLOCK = "40P01";
  /** How long after its last deadlock the messages of a key run alone. */
  static final Duration KEY_MEMORY = Duration.ofSeconds(30);

  // The consumer's log category: operators and tests address the pipeline's messages by it.
  private static final Logger log = LoggerFactory.getLogger(Pipeline.LOG);
  private static final int IDS_IN_LOG = 10;

  private final String name;
  private final TransactionGate gate = new TransactionGate();
  /** Keys that deadlocked, with the {@link System#nanoTime()} until which their messages run alone. */
  private final ConcurrentHashMap<String, Long> keysAlone = new ConcurrentHashMap<>();
  private final AtomicLong deadlocks = new AtomicLong();

  DeadlockRecovery(ConsumerSettings<?> settings) {
    this.name = settings.name();
  }

  /**
   * One transaction attempt of {@code messages}: alone after their deadlock or when one of them
   * has a key that deadlocked lately, else side by side with the others.
   *
   * @param messages the messages of the attempt's transaction
   * @param afterDeadlock whether an earlier attempt of theirs deadlocked
   * @param attempt the attempt
   */
  <R> Mono<R> attempt(List<? extends Delivery<?>> messages, boolean afterDeadlock, Mono<R> attempt) {
    return Mono.defer(() -> gate.run(afterDeadlock || hasKeyAlone(messages), attempt));
  }

  /**
   * Told of every failed attempt: when it failed with a deadlock, remembers the messages' keys,
   * logs at WARN and answers true: the next attempts of these messages must run alone.
   *
   * @param messages the messages of the failed transaction
   * @param failure what ended the attempt
   * @return whether it was a deadlock
   */
  boolean failed(List<? extends Delivery<?>> messages, Throwable failure) {
    if (!isDeadlock(failure)) {
      return false;
    }
    long count = deadlocks.incrementAndGet();
    long now = System.nanoTime();
    keysAlone.values().removeIf(until -> until - now < 0);
    Set<String> keys = new LinkedHashSet<>();
    for (Delivery<?> d : messages) {
      String key = keyOf(d);
      if (key != null) {
        keys.add(key);
        keysAlone.put(key, now + KEY_MEMORY.toNanos());
      }
    }
    log.warn("Consumer '{}': deadlock (SQLSTATE {}; deadlock {} of this consumer, each costs PostgreSQL's deadlock_timeout) "
        + "in the transaction of {}; it is retried alone (no other transaction of this consumer runs meanwhile){}: {}",
        name, DEADLOCK, count, describe(messages), keys.isEmpty()
            ? ""
            : ", and the messages of its key(s) " + LogText.cut(String.join(", ", keys)) + " run alone for the next "
                + KEY_MEMORY.toSeconds()
                + " s. Handlers that update shared rows in different orders deadlock; update them in one order",
        LogText.cut(FailureKinds.cause(failure).toString()));
    return true;
  }

  /** Whether the failure, or one of its causes, is a deadlock. */
  static boolean isDeadlock(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof R2dbcException r2dbc && DEADLOCK.equals(r2dbc.getSqlState())) {
        return true;
      }
    }
    return false;
  }

  private boolean hasKeyAlone(List<? extends Delivery<?>> messages) {
    if (keysAlone.isEmpty()) {
      return false;
    }
    long now = System.nanoTime();
    for (Delivery<?> d : messages) {
      String key = keyOf(d);
      Long until = key == null ? null : keysAlone.get(key);
      if (until != null && until - now > 0) {
        return true;
      }
    }
    return false;
  }

  private static @Nullable String keyOf(Delivery<?> delivery) {
    try {
      return delivery.orderingKey();
    } catch (RuntimeException e) {
      return null;
    }
  }

  private static String describe(List<? extends Delivery<?>> messages) {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < Math.min(messages.size(), IDS_IN_LOG); i++) {
      ids.add("'" + Settlement.idForLogs(messages.get(i)) + "'");
    }
    String more = messages.size() > IDS_IN_LOG ? " and " + (messages.size() - IDS_IN_LOG) + " more" : "";
    return (messages.size() == 1 ? "message " : messages.size() + " messages ") + String.join(", ", ids) + more;
  }
}
