package dev.idem.rabbit;

import dev.idem.Delivery;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;

/**
 * One test's world: its own queue (with dead-letter exchange and queue), consumer name, business
 * table and inbox table on the real RabbitMQ and PostgreSQL, all removed by {@link #close()}.
 */
final class RabbitFixture implements AutoCloseable {

  final RabbitService rabbit = RabbitService.get();
  final PostgresService postgres = PostgresService.get();
  final String queue;
  final String deadLetterQueue;
  final String consumer;
  final String effects;
  final PostgresInbox inbox;
  final ConnectionPool pool;
  final Map<Outcome.Status, AtomicInteger> outcomes = new ConcurrentHashMap<>();
  final List<Outcome<String>> settled = new CopyOnWriteArrayList<>();
  private final List<AutoCloseable> resources = new ArrayList<>();
  private final List<Disposable> running = new ArrayList<>();

  RabbitFixture(String prefix, RabbitTopology.QueueType type) throws java.io.IOException {
    this.queue = PostgresService.uniqueName(prefix);
    this.deadLetterQueue = RabbitTopology.deadLetterQueue(queue);
    this.consumer = PostgresService.uniqueName(prefix + "_consumer");
    this.effects = PostgresService.uniqueName(prefix + "_effects");
    this.pool = postgres.pool(16);
    this.inbox = PostgresInbox.create(pool, PostgresService.uniqueName(prefix + "_inbox"));
    try {
      RabbitTopology.declare(rabbit.admin(), queue, type);
      postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL, body text NOT NULL)");
      inbox.createSchemaIfAbsent().block(Duration.ofSeconds(60));
    } catch (RuntimeException | java.io.IOException e) {
      try {
        close();
      } catch (RuntimeException | java.io.IOException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
  }

  /** Options for this fixture's queue with a unique connection name. */
  RabbitSourceOptions.Builder options() {
    return RabbitSourceOptions.builder(queue)
        .uri(rabbit.uri())
        .connectionName(PostgresService.uniqueName("idem-test-conn"))
        .recoveryBackoff(Duration.ofMillis(100), Duration.ofSeconds(2));
  }

  /** A handler that records one effect row per call. */
  Handler<String> recordingHandler() {
    return (payload, tx) -> tx.sql("INSERT INTO " + effects + " (message_id, body) VALUES ($1, $2)")
        .bind(0, tx.messageId()).bind(1, payload).execute();
  }

  IdempotentConsumer.Builder<String> consumer(Handler<String> handler) {
    return IdempotentConsumer.<String>named(consumer).inbox(inbox).handler(handler).concurrency(8);
  }

  RabbitSource<String> source(RabbitSourceOptions options) {
    RabbitSource<String> source = RabbitSource.create(options, PayloadDecoder.utf8());
    resources.add(source);
    return source;
  }

  <T> RabbitSource<T> source(RabbitSourceOptions options, PayloadDecoder<T> decoder) {
    RabbitSource<T> source = RabbitSource.create(options, decoder);
    resources.add(source);
    return source;
  }

  /** Runs the pipeline on a source, recording outcomes. */
  Disposable run(RabbitSource<String> source, IdempotentConsumer<String> pipeline) {
    return run(source.receive(), pipeline);
  }

  Disposable run(Flux<Delivery<String>> deliveries, IdempotentConsumer<String> pipeline) {
    Disposable d = deliveries.transform(pipeline::process)
        .subscribe(this::record, error -> System.err.println("pipeline failed: " + error));
    running.add(d);
    return d;
  }

  /** Runs the pipeline on a source whose payload type differs from the handler's string. */
  <T> Disposable runMapped(RabbitSource<T> source, IdempotentConsumer<T> pipeline, Function<Outcome<T>, Outcome.Status> status) {
    Disposable d = source.receive().transform(pipeline::process)
        .subscribe(o -> outcomes.computeIfAbsent(status.apply(o), s -> new AtomicInteger()).incrementAndGet(),
            error -> System.err.println("pipeline failed: " + error));
    running.add(d);
    return d;
  }

  private void record(Outcome<String> outcome) {
    settled.add(outcome);
    outcomes.computeIfAbsent(outcome.status(), s -> new AtomicInteger()).incrementAndGet();
  }

  int outcomes(Outcome.Status status) {
    AtomicInteger n = outcomes.get(status);
    return n == null ? 0 : n.get();
  }

  long effectRows() {
    return postgres.count("SELECT count(*) FROM " + effects);
  }

  long distinctEffects() {
    return postgres.count("SELECT count(DISTINCT message_id) FROM " + effects);
  }

  /** Stops every pipeline and closes every source (unacknowledged messages return to the queue). */
  void stopConsumers() {
    running.forEach(Disposable::dispose);
    running.clear();
    for (AutoCloseable r : resources) {
      try {
        r.close();
      } catch (Exception e) {
        // best effort
      }
    }
    resources.clear();
  }

  @Override
  public void close() throws java.io.IOException {
    stopConsumers();
    try {
      RabbitTopology.delete(rabbit.admin(), queue);
    } finally {
      try {
        postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
      } finally {
        pool.dispose();
      }
    }
  }
}
