package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.BatchHandler;
import dev.idem.BatchItem;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.Tx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntSupplier;
import java.util.stream.Collectors;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The workload of the graceful-stop contract tests on the real brokers (issue 17, item 1): two
 * consumers of one consumer name and inbox, {@link Ordering#BY_KEY}, concurrency 4, prefetch 256,
 * 10% of the ids published twice, 3% of the ids failing once with a retryable error (retried, in
 * batch mode off their lane, after a short backoff), and a few milliseconds per message inside the
 * transaction so that messages are still flowing when the stop comes.
 *
 * <p>The stop is triggered deterministically: the first attempt of a failing id that begins after
 * {@link #STOP_AFTER} outcomes settled opens {@link #awaitTrigger(Duration) the trigger} and holds
 * its transaction open until the test says that the stop began ({@link #stopBegan()}). So at the
 * stop that message (and, batched, its batch) is in flight. Only then does it fail, first with
 * contention (a serialization failure: a batch waits in a backoff and is retried whole, in place),
 * then with the retryable error (batched: it leaves its lane and waits in its own backoff). Both
 * backoffs begin after the stop began and end well within the grace period: a graceful stop must
 * wait for them, not abandon them.
 */
public final class GracefulStopWorkload {

  /** Distinct message ids. */
  public static final int DISTINCT = 1_800;
  /** Ids published twice: every tenth. */
  public static final int REPEATS = DISTINCT / 10;
  /** Publications, repeats included. */
  public static final int PUBLISHED = DISTINCT + REPEATS;
  /** Ordering keys the ids spread over. */
  public static final int KEYS = 50;
  /** Outcomes settled (over both consumers) before a failing message triggers the stop. */
  public static final int STOP_AFTER = 400;
  /** The grace period of the stop. */
  public static final Duration GRACE = Duration.ofSeconds(20);
  /** Each message's time inside its transaction, after its effect row. */
  public static final Duration PER_MESSAGE = Duration.ofMillis(2);
  /** Retries of the failing messages end within the grace period. */
  public static final RetryPolicy RETRY = RetryPolicy.backoff(5, Duration.ofMillis(50));

  /** How the messages are processed. */
  public enum Mode {
    /** One transaction per message, a per-message {@link Handler}. */
    PER_MESSAGE(1, false),
    /** Micro-batches of up to 64 with a per-message {@link Handler}. */
    BATCH_WITH_HANDLER(64, false),
    /** Micro-batches of up to 64 with a {@link BatchHandler}. */
    BATCH_WITH_BATCH_HANDLER(64, true);

    private final int maxBatchSize;
    private final boolean batchHandler;

    Mode(int maxBatchSize, boolean batchHandler) {
      this.maxBatchSize = maxBatchSize;
      this.batchHandler = batchHandler;
    }
  }

  /**
   * One publication.
   *
   * @param id the message id
   * @param key the ordering key (the repeat of an id has its key)
   * @param payload the payload
   */
  public record Publication(String id, String key, String payload) {}

  private final String insertOne;
  private final String insertMany;
  private final IntSupplier settledSoFar;
  /** Failing ids whose one failure happened (for a {@link BatchHandler}: alone, after the splits). */
  private final Set<String> failed = ConcurrentHashMap.newKeySet();
  private final AtomicReference<String> trigger = new AtomicReference<>();
  private final CountDownLatch triggered = new CountDownLatch(1);
  private final Sinks.Empty<Void> stopBegan = Sinks.empty();
  /** Handler runs that held the trigger once the stop began (a batch handler's runs count each batch that holds it). */
  private final java.util.concurrent.atomic.AtomicInteger triggerRunsAfterStop = new java.util.concurrent.atomic.AtomicInteger();
  private final java.util.concurrent.atomic.AtomicBoolean stopped = new java.util.concurrent.atomic.AtomicBoolean();

  /**
   * @param table the business table
   * @param idColumn its text column for the message id
   * @param payloadColumn its text column for the payload
   * @param settledSoFar the outcomes settled so far by the consumers under test
   */
  public GracefulStopWorkload(String table, String idColumn, String payloadColumn, IntSupplier settledSoFar) {
    this.insertOne = "INSERT INTO " + table + " (" + idColumn + ", " + payloadColumn + ") VALUES ($1, $2)";
    this.insertMany = "INSERT INTO " + table + " (" + idColumn + ", " + payloadColumn
        + ") SELECT * FROM unnest($1::text[], $2::text[])";
    this.settledSoFar = settledSoFar;
  }

  /**
   * The publications, in order: the ids in order, the repeat of every tenth id a few (1 to 24)
   * publications after it, so that both copies are often in flight at once on two consumers.
   *
   * @return {@link #PUBLISHED} publications
   */
  public static List<Publication> publications() {
    Random random = new Random(17);
    Map<Integer, List<Integer>> repeatsAfter = new HashMap<>();
    for (int i = 0; i < DISTINCT; i += 10) {
      int after = Math.min(DISTINCT - 1, i + 1 + random.nextInt(24));
      repeatsAfter.computeIfAbsent(after, k -> new ArrayList<>()).add(i);
    }
    List<Publication> out = new ArrayList<>(PUBLISHED);
    for (int i = 0; i < DISTINCT; i++) {
      out.add(publication(i));
      for (int repeated : repeatsAfter.getOrDefault(i, List.of())) {
        out.add(publication(repeated));
      }
    }
    return out;
  }

  private static Publication publication(int i) {
    return new Publication(id(i), "key-" + i % KEYS, "payload-" + i);
  }

  /**
   * The id of message {@code i}.
   *
   * @param i 0 to {@link #DISTINCT} - 1
   * @return its id
   */
  public static String id(int i) {
    return "msg-" + i;
  }

  /**
   * Every id, once.
   *
   * @return the {@link #DISTINCT} ids
   */
  public static Set<String> ids() {
    Set<String> ids = new HashSet<>();
    for (int i = 0; i < DISTINCT; i++) {
      ids.add(id(i));
    }
    return ids;
  }

  /** 60 ids (3.3%), none of them repeated, fail once with a retryable error (the trigger first with contention too). */
  static boolean failsOnce(String id) {
    return Integer.parseInt(id.substring("msg-".length())) % 30 == 7;
  }

  /**
   * The consumer of this workload in a mode: the shared inbox and consumer name come with
   * {@code builder}.
   *
   * @param builder the builder with name and inbox
   * @param mode the mode
   * @return the consumer
   */
  public IdempotentConsumer<String> consumer(IdempotentConsumer.Builder<String> builder, Mode mode) {
    builder.concurrency(4).prefetch(256).ordering(Ordering.BY_KEY).retry(RETRY).maxBatchSize(mode.maxBatchSize);
    return mode.batchHandler ? builder.batchHandler(batchHandler()).build() : builder.handler(handler()).build();
  }

  /** Writes the effect row, lingers, and fails the first time for a failing id (the trigger: twice). */
  private Handler<String> handler() {
    return (payload, tx) -> {
      String id = tx.messageId();
      countTriggerRun(id);
      Mono<Void> effect = tx.sql(insertOne).bind(0, id).bind(1, payload).execute().then(Mono.delay(PER_MESSAGE)).then();
      if (!failsOnce(id)) {
        return effect;
      }
      if (!failed.contains(id) && triggers(id)) {
        return effect.then(contentionAfterTheStop(tx));
      }
      return failed.add(id) ? effect.then(failure(id, tx)) : effect;
    };
  }

  /**
   * Writes the effect rows in one statement, lingers, and fails while the batch holds a failing
   * id that has not failed alone yet: so the batch splits in halves down to that message alone,
   * which fails once more and is retried off its lane after a backoff. The trigger's batch first
   * fails with contention, and is retried whole.
   */
  private BatchHandler<String> batchHandler() {
    return (items, tx) -> {
      String[] ids = items.stream().map(BatchItem::messageId).toArray(String[]::new);
      items.forEach(item -> countTriggerRun(item.messageId()));
      String[] payloads = items.stream().map(BatchItem::payload).toArray(String[]::new);
      Mono<Void> effect = tx.sql(insertMany).bind(0, ids).bind(1, payloads).execute()
          .then(Mono.delay(PER_MESSAGE.multipliedBy(items.size()))).then();
      String failing = items.stream().map(BatchItem::messageId).filter(id -> failsOnce(id) && !failed.contains(id))
          .findFirst().orElse(null);
      if (failing == null) {
        return effect;
      }
      if (triggers(failing)) {
        return effect.then(contentionAfterTheStop(tx));
      }
      if (items.size() == 1) {
        failed.add(failing);
      }
      return effect.then(failure(failing, tx));
    };
  }

  /** Counts a run of the trigger's handler that began after the stop began. */
  private void countTriggerRun(String id) {
    if (id.equals(trigger.get()) && stopped.get()) {
      triggerRunsAfterStop.incrementAndGet();
    }
  }

  /**
   * How many times the trigger's handler ran after the stop began: the one that held it open
   * fails at the stop without counting; then the attempt that fails with the retryable error, and
   * the one that commits, each after a backoff that began after the stop (a batch handler's
   * halving adds runs). At least 2 says the stop waited out the trigger's backoffs.
   *
   * @return the runs
   */
  public int triggerRunsAfterStop() {
    return triggerRunsAfterStop.get();
  }

  /** Whether this failing message's attempt triggers the stop: the first after {@link #STOP_AFTER} outcomes. */
  private boolean triggers(String id) {
    if (settledSoFar.getAsInt() >= STOP_AFTER && trigger.compareAndSet(null, id)) {
      triggered.countDown();
      return true;
    }
    return false;
  }

  /**
   * Once the stop began, a serialization failure from PostgreSQL (SQLSTATE 40001): contention, so
   * a batch is retried whole, in place, after a backoff (a message alone, after its backoff).
   * Its next attempt fails with the retryable error that sends it off its lane; the one after
   * succeeds.
   */
  private Mono<Void> contentionAfterTheStop(Tx tx) {
    return stopBegan.asMono()
        .then(tx.sql("DO $$BEGIN RAISE EXCEPTION 'test: could not serialize access' USING ERRCODE = '40001'; END$$").execute())
        .then();
  }

  private static Mono<Void> failure(String id, Tx tx) {
    return Mono.error(new IllegalStateException("test: " + id + " fails once (consumer " + tx.consumer() + ")"));
  }

  /**
   * Waits until a failing message holds its transaction open for the stop.
   *
   * @param timeout how long at most
   * @return the failing message's id
   * @throws InterruptedException when interrupted
   */
  public String awaitTrigger(Duration timeout) throws InterruptedException {
    assertThat(triggered.await(timeout.toMillis(), TimeUnit.MILLISECONDS))
        .as("a failing message began after %d outcomes and triggered the stop", STOP_AFTER).isTrue();
    return trigger.get();
  }

  /** Tells the message of {@link #awaitTrigger} that the stop began: it fails now, after the stop began. */
  public void stopBegan() {
    stopped.set(true);
    stopBegan.tryEmitEmpty();
  }

  /**
   * Counts outcomes by message id.
   *
   * @param outcomes the outcomes
   * @return id to the number of its outcomes
   */
  public static Map<String, Long> perId(Collection<? extends Outcome<String>> outcomes) {
    return outcomes.stream().collect(Collectors.groupingBy(Outcome::messageId, Collectors.counting()));
  }

  /**
   * Counts outcomes by status.
   *
   * @param outcomes the outcomes
   * @param status the status
   * @return how many have it
   */
  public static long count(Collection<? extends Outcome<String>> outcomes, Outcome.Status status) {
    return outcomes.stream().filter(o -> o.status() == status).count();
  }

  /**
   * How many times each id is published.
   *
   * @return id to 1 or 2
   */
  public static Map<String, Long> publishedPerId() {
    return publications().stream().collect(Collectors.groupingBy(Publication::id, Collectors.counting()));
  }

  /**
   * The business rows per message id.
   *
   * @param pg the database
   * @param table the business table
   * @param idColumn its id column
   * @return id to its rows
   */
  public static Map<String, Long> effectRows(PostgresService pg, String table, String idColumn) {
    Map<String, Long> rows = new HashMap<>();
    for (Map<String, Object> row : pg
        .query("SELECT " + idColumn + " AS id, count(*) AS n FROM " + table + " GROUP BY " + idColumn)) {
      rows.put((String) row.get("id"), ((Number) row.get("n")).longValue());
    }
    return rows;
  }

  /**
   * The ids of a consumer in an inbox table.
   *
   * @param pg the database
   * @param inboxTable the inbox table
   * @param consumer the consumer name
   * @return its message ids, each once (the primary key)
   */
  public static Set<String> inboxIds(PostgresService pg, String inboxTable, String consumer) {
    return pg.column("SELECT message_id FROM " + inboxTable + " WHERE consumer = $1", consumer).stream()
        .map(String.class::cast).collect(Collectors.toSet());
  }
}
