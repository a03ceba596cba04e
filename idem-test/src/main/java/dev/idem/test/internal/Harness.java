package dev.idem.test.internal;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.RetryPolicy;
import dev.idem.ServerTimeouts;
import dev.idem.internal.R2dbcTransactionRunner;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.test.InMemoryDelivery;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The runner's hands on the user's database and on the pipeline: consumers with the instrumented
 * handler, deliveries with the user's id rule, reset, probe, side-effect count; and the cleanup of
 * its own dedup rows.
 *
 * @param <T> the payload type
 */
final class Harness<T> implements AutoCloseable {

  private static final int POOL_SIZE = 8;
  /** The most lanes a schedule runs. */
  static final int MAX_LANES = 4;

  private final ContractSettings<T> settings;
  private final ConnectionFactory connections;
  private final @Nullable ConnectionPool ownPool;
  private final PostgresInbox inbox;
  /**
   * One runner for every consumer of the run: each keeps a few connections between transactions,
   * and consumers with runners of their own would hold them from each other until they idle out.
   */
  private final R2dbcTransactionRunner transactions;
  private final String consumerPrefix = "idem_test_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  private final AtomicInteger consumers = new AtomicInteger();
  private final AtomicLong statements = new AtomicLong();
  private volatile int failAfter = Attempt.NO_FAILURE;
  private int deliveries;

  Harness(ContractSettings<T> settings) {
    this.settings = settings;
    if (settings.connectionFactory() instanceof ConnectionPool pool) {
      this.connections = pool;
      this.ownPool = null;
    } else {
      String url = settings.url();
      this.ownPool = url != null
          ? PostgresConnections.pool(url, POOL_SIZE)
          : PostgresConnections.pool(Objects.requireNonNull(settings.connectionFactory(),
              "the builder requires a connection factory or a URL"), POOL_SIZE);
      this.connections = ownPool;
    }
    this.inbox = PostgresInbox.create(connections, settings.inboxTable());
    this.transactions = new R2dbcTransactionRunner(connections,
        ServerTimeouts.derivedFrom(IdempotentConsumer.DEFAULT_TRANSACTION_TIMEOUT), MAX_LANES);
    try {
      await(inbox.createSchemaIfAbsent(), "creating the runner's inbox table " + settings.inboxTable());
    } catch (RuntimeException unreachable) {
      if (ownPool != null) {
        ownPool.dispose();
      }
      throw new IllegalStateException("idem-test could not create its inbox table " + settings.inboxTable()
          + " in the PostgreSQL given to postgres(...)" + (settings.url() != null ? " (" + masked(settings.url()) + ")" : "")
          + ": is the server running and the database reachable? " + unreachable.getMessage(), unreachable);
    }
  }

  /** The URL without its password. */
  static String masked(String url) {
    return url.replaceFirst("(://[^:/@]*:)[^@]*@", "$1***@");
  }

  /** A consumer name of the runner's own, new each call. */
  String newConsumerName() {
    return consumerPrefix + "_" + consumers.incrementAndGet();
  }

  /** A consumer with a new instance of the user's handler. */
  IdempotentConsumer<T> consumer(String name, int maxBatchSize, int concurrency) {
    return consumer(name, maxBatchSize, concurrency, false);
  }

  /** A consumer with a new instance of the user's handler, or one for every call of it. */
  IdempotentConsumer<T> consumer(String name, int maxBatchSize, int concurrency, boolean freshHandlerPerCall) {
    IdempotentConsumer.Builder<T> builder = IdempotentConsumer.<T>named(name)
        .inbox(inbox)
        .transactionRunner(transactions)
        .maxBatchSize(maxBatchSize)
        .concurrency(concurrency)
        .ordering(Ordering.BY_KEY)
        .retry(RetryPolicy.none());
    settings.handler().install(builder, statements, () -> failAfter, freshHandlerPerCall);
    return builder.build();
  }

  /** A delivery of the template, as the {@code attempt}-th delivery of its message, with the rule's id. */
  InMemoryDelivery<T> delivery(InMemoryDelivery<T> template, int attempt) {
    InMemoryDelivery<T> delivery = template.withId(template.id());
    for (int i = 1; i < attempt; i++) {
      delivery = delivery.redelivered();
    }
    return delivery.withId(settings.messageId().apply(delivery));
  }

  /** Processes the deliveries to completion. */
  List<Outcome<T>> process(IdempotentConsumer<T> consumer, List<InMemoryDelivery<T>> batch) {
    deliveries += batch.size();
    return Objects.requireNonNull(await(consumer.process(Flux.fromIterable(batch)).collectList(),
        "processing " + batch.size() + " deliveries"), "collectList() emits a list");
  }

  /**
   * A pipeline of the consumer kept running, for schedules that hand it one delivery at a time: a
   * {@code process(...)} per delivery would pay the pipeline's start each time.
   */
  Line<T> line(IdempotentConsumer<T> consumer) {
    return new Line<>(consumer, settings.stepTimeout(), n -> deliveries += n);
  }

  /** Processes the deliveries and cancels the pipeline once {@code settled} outcomes came out. */
  void processAndStop(IdempotentConsumer<T> consumer, List<InMemoryDelivery<T>> batch, int settled) {
    deliveries += batch.size();
    await(consumer.process(Flux.fromIterable(batch).concatWith(Flux.never())).take(settled).then(),
        "processing " + batch.size() + " deliveries until " + settled + " settled");
  }

  /** The failure plan for the next attempts: fail after statement {@code n}, or {@link Attempt#NO_FAILURE}. */
  void failAfter(int n) {
    failAfter = n;
  }

  /** The statements the handler ran through its {@code Tx} so far. */
  long statements() {
    return statements.get();
  }

  /** The user's count of side-effect calls, 0 without one. */
  long sideEffects() {
    return settings.sideEffects() == null ? 0 : settings.sideEffects().getAsLong();
  }

  int deliveries() {
    return deliveries;
  }

  void reset() {
    withConnection(settings.reset(), "the reset");
  }

  List<Object> probe() {
    List<Object> values = withConnection(c -> Flux.from(settings.probe().read(c)), "the probe");
    return values == null ? List.of() : values;
  }

  private @Nullable List<Object> withConnection(Function<Connection, Publisher<?>> work, String what) {
    return await(Flux.usingWhen(connections.create(), work, Connection::close).<Object>map(v -> v).collectList(),
        what);
  }

  private <R> @Nullable R await(Mono<R> work, String what) {
    try {
      return work.block(settings.stepTimeout());
    } catch (IllegalStateException timeout) {
      if (timeout.getMessage() == null || !timeout.getMessage().startsWith("Timeout on blocking read")) {
        throw timeout;
      }
      throw new IllegalStateException("idem-test: " + what + " did not finish within " + settings.stepTimeout()
          + " (a handler waiting on a lock its other connection holds?)", timeout);
    }
  }

  @Override
  public void close() {
    try {
      Objects.requireNonNull(withConnection(c -> Flux.from(c.createStatement("DELETE FROM " + inbox.table()
          + " WHERE consumer LIKE $1").bind(0, consumerPrefix + "%").execute()).concatMap(r -> r.getRowsUpdated()),
          "removing the runner's dedup rows"));
    } finally {
      if (ownPool != null) {
        ownPool.dispose();
      }
    }
  }
}
