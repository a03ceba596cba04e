package dev.idem.test;

import dev.idem.BatchHandler;
import dev.idem.Delivery;
import dev.idem.Handler;
import dev.idem.test.internal.ContractRunner;
import dev.idem.test.internal.ContractSettings;
import dev.idem.test.internal.HandlerUnderTest;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;

/**
 * Proves a user's {@link Handler} or {@link BatchHandler} exactly-once against the user's own
 * PostgreSQL, with no broker: it feeds the given messages through Idem's real pipeline once (the
 * clean run), then replays them under each hostile {@link Schedule} (redelivery after commit,
 * duplicates inside and across batches, a failure injected after each of the handler's
 * statements, concurrent lanes, batch and per-message modes, a stop mid-batch followed by a fresh
 * consumer) and compares the user's {@linkplain Builder#probe(String) probe} of the business
 * state with the clean run's. Each difference becomes a {@link Finding} that names the
 * {@link Mistake}, the schedule, the step and the message ids.
 *
 * <pre>{@code
 * HandlerContract.forHandler("credit account", () -> new CreditAccount())
 *     .postgres(connectionFactory)
 *     .reset("DELETE FROM accounts", "INSERT INTO accounts (id, balance) VALUES (1, 0), (2, 0)")
 *     .probe("SELECT id, balance FROM accounts ORDER BY id")
 *     .messages(InMemoryDelivery.of("p-1", new Payment(1, 500)).withKey("1"),
 *               InMemoryDelivery.of("p-2", new Payment(2, 300)).withKey("2"))
 *     .build()
 *     .verify();   // throws ContractViolation, an AssertionError, naming each mistake found
 * }</pre>
 *
 * <p>What the runner needs from the user:
 * <ul>
 *   <li>a handler <em>supplier</em>: the runner builds a new instance for every consumer it starts
 *       (as a restarted application does), which is how it finds state kept in memory;</li>
 *   <li>a <b>reset</b> that puts the business tables back to the same starting state (it runs
 *       before every schedule) and a <b>probe</b> that reads the business state in a stable order
 *       and leaves out values that change from run to run;</li>
 *   <li>messages with ordering keys wherever their order matters (messages of one key are kept in
 *       order by {@link dev.idem.Ordering#BY_KEY}; messages of different keys run concurrently);</li>
 *   <li>optionally the {@linkplain Builder#messageId message-id rule} of the application and a
 *       {@linkplain Builder#sideEffects count of calls} to the fakes of outside systems.</li>
 * </ul>
 *
 * <p>The runner records its dedup rows in its own inbox table ({@value #DEFAULT_INBOX_TABLE} by
 * default, created if absent) under consumer names of its own ({@code idem_test_<random>_<n>}),
 * and deletes those rows at the end. Each step waits at most {@link Builder#stepTimeout} (default
 * 60 s). A run is not thread-safe; run one at a time per database, or give each its own tables.
 *
 * @param <T> the payload type
 */
public final class HandlerContract<T> {

  /** The inbox table the runner records its dedup rows in, unless told otherwise: {@value}. */
  public static final String DEFAULT_INBOX_TABLE = "idem_test_processed_messages";

  private final ContractSettings<T> settings;

  private HandlerContract(ContractSettings<T> settings) {
    this.settings = settings;
  }

  /**
   * Starts a contract for a per-message handler.
   *
   * @param name a name for reports
   * @param handlers makes a new handler instance; called for every consumer the runner starts
   * @param <T> the payload type
   * @return a builder
   */
  public static <T> Builder<T> forHandler(String name, Supplier<? extends Handler<T>> handlers) {
    Objects.requireNonNull(handlers, "handlers");
    return new Builder<>(name, HandlerUnderTest.perMessage(handlers));
  }

  /**
   * Starts a contract for a batch handler (called with lists of one in the per-message schedules).
   *
   * @param name a name for reports
   * @param handlers makes a new handler instance; called for every consumer the runner starts
   * @param <T> the payload type
   * @return a builder
   */
  public static <T> Builder<T> forBatchHandler(String name, Supplier<? extends BatchHandler<T>> handlers) {
    Objects.requireNonNull(handlers, "handlers");
    return new Builder<>(name, HandlerUnderTest.batch(handlers));
  }

  /**
   * Runs every schedule and reports what it found, without throwing for findings.
   *
   * @return the report
   * @throws IllegalStateException when the database cannot be reached or a step times out
   */
  public ContractReport run() {
    return new ContractRunner<>(settings).run();
  }

  /**
   * Runs every schedule and fails when anything was found.
   *
   * @return the report of a run without findings (its timings, say)
   * @throws ContractViolation naming each mistake found, with its schedule, step and messages
   */
  public ContractReport verify() {
    ContractReport report = run();
    if (!report.passed()) {
      throw new ContractViolation(report);
    }
    return report;
  }

  @Override
  public String toString() {
    return "HandlerContract[" + settings.name() + ", " + settings.messages().size() + " messages]";
  }

  /**
   * Configures a {@link HandlerContract}. Required: {@link #postgres}, {@link #reset},
   * {@link #probe} and at least one message.
   *
   * @param <T> the payload type
   */
  public static final class Builder<T> {

    private final String name;
    private final HandlerUnderTest<T> handler;
    private @Nullable ConnectionFactory connectionFactory;
    private @Nullable String url;
    private final List<InMemoryDelivery<T>> messages = new ArrayList<>();
    private Function<? super Delivery<T>, @Nullable String> messageId = Delivery::id;
    private @Nullable Function<Connection, Publisher<?>> reset;
    private @Nullable EffectProbe probe;
    private @Nullable LongSupplier sideEffects;
    private String inboxTable = DEFAULT_INBOX_TABLE;
    private java.time.Duration stepTimeout = java.time.Duration.ofSeconds(60);

    private Builder(String name, HandlerUnderTest<T> handler) {
      this.name = Objects.requireNonNull(name, "name");
      this.handler = handler;
    }

    /**
     * The user's PostgreSQL, as a connection factory (a pool is used as is; another factory is
     * pooled by the runner, up to 8 connections, and the pool disposed after the run).
     *
     * @param factory the factory
     * @return this builder
     */
    public Builder<T> postgres(ConnectionFactory factory) {
      this.connectionFactory = Objects.requireNonNull(factory, "factory");
      this.url = null;
      return this;
    }

    /**
     * The user's PostgreSQL, as an R2DBC URL such as
     * {@code r2dbc:postgresql://user:secret@localhost:5432/app} (a Testcontainers container's
     * host, port and credentials fit it); the runner pools up to 8 connections.
     *
     * @param r2dbcUrl the URL
     * @return this builder
     */
    public Builder<T> postgres(String r2dbcUrl) {
      this.url = Objects.requireNonNull(r2dbcUrl, "r2dbcUrl");
      this.connectionFactory = null;
      return this;
    }

    /**
     * The messages, in the order of the clean run. Their ids are the ones the
     * {@link #messageId id rule} computes; copies are delivered, these stay unsettled.
     *
     * @param deliveries at least one
     * @return this builder
     */
    @SafeVarargs
    public final Builder<T> messages(InMemoryDelivery<T>... deliveries) {
      for (InMemoryDelivery<T> delivery : deliveries) {
        messages.add(Objects.requireNonNull(delivery, "delivery"));
      }
      return this;
    }

    /**
     * The messages, in the order of the clean run.
     *
     * @param deliveries at least one
     * @return this builder
     */
    public Builder<T> messages(List<InMemoryDelivery<T>> deliveries) {
      deliveries.forEach(d -> messages.add(Objects.requireNonNull(d, "delivery")));
      return this;
    }

    /**
     * The application's message-id rule, applied to every delivery the runner makes (first
     * deliveries and redeliveries, which have a higher {@link Delivery#deliveryAttempt()} and a
     * later {@link Delivery#timestamp()}). Default: the id the message was created with.
     *
     * @param rule computes the dedup key from a delivery; {@code null} for none (the message is dead-lettered)
     * @return this builder
     */
    public Builder<T> messageId(Function<? super Delivery<T>, @Nullable String> rule) {
      this.messageId = Objects.requireNonNull(rule, "rule");
      return this;
    }

    /**
     * SQL statements that restore the business tables' starting state; run in order, in
     * autocommit, before each schedule.
     *
     * @param statements for example {@code "DELETE FROM accounts"}, then the seed rows
     * @return this builder
     */
    public Builder<T> reset(String... statements) {
      List<String> sql = List.of(statements);
      return reset(connection -> Flux.fromIterable(sql)
          .concatMap(s -> Flux.from(connection.createStatement(s).execute()).concatMap(r -> r.getRowsUpdated())));
    }

    /**
     * Restores the business tables' starting state; run before each schedule.
     *
     * @param reset given a connection in autocommit; completes when done
     * @return this builder
     */
    public Builder<T> reset(Function<Connection, Publisher<?>> reset) {
      this.reset = Objects.requireNonNull(reset, "reset");
      return this;
    }

    /**
     * A query that reads the business state, each row as a map from column name to value; order
     * its rows ({@code ORDER BY}) and leave out columns that change from run to run.
     *
     * @param query the query
     * @return this builder
     */
    public Builder<T> probe(String query) {
      Objects.requireNonNull(query, "query");
      return probe(connection -> Flux.from(connection.createStatement(query).execute())
          .concatMap(result -> result.map((row, meta) -> {
            Map<String, Object> values = new LinkedHashMap<>();
            meta.getColumnMetadatas().forEach(c -> values.put(c.getName(), row.get(c.getName())));
            return values;
          })));
    }

    /**
     * Reads the business state.
     *
     * @param probe the probe
     * @return this builder
     */
    public Builder<T> probe(EffectProbe probe) {
      this.probe = Objects.requireNonNull(probe, "probe");
      return this;
    }

    /**
     * How many calls the handler made to the fakes of outside systems (HTTP clients, mail,
     * another broker) so far, for example {@code fakePaymentGateway::calls}. A call made from an
     * attempt that then rolled back is reported as {@link Mistake#SIDE_EFFECT_OUTSIDE_OUTBOX}.
     * Default: none counted.
     *
     * @param calls reads the running count
     * @return this builder
     */
    public Builder<T> sideEffects(LongSupplier calls) {
      this.sideEffects = Objects.requireNonNull(calls, "calls");
      return this;
    }

    /**
     * The inbox table the runner records its dedup rows in (created if absent). Default
     * {@value HandlerContract#DEFAULT_INBOX_TABLE}.
     *
     * @param table a table name, optionally schema-qualified
     * @return this builder
     */
    public Builder<T> inboxTable(String table) {
      this.inboxTable = Objects.requireNonNull(table, "table");
      return this;
    }

    /**
     * The longest the runner waits for one step (a delivery settled, a reset, a probe).
     * Default 60 s.
     *
     * @param timeout positive
     * @return this builder
     */
    public Builder<T> stepTimeout(java.time.Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("stepTimeout must be positive, was " + timeout);
      }
      this.stepTimeout = timeout;
      return this;
    }

    /**
     * Checks the settings.
     *
     * @return the contract, ready to {@link HandlerContract#verify()}
     * @throws IllegalStateException naming the missing setting
     */
    public HandlerContract<T> build() {
      if (connectionFactory == null && url == null) {
        throw new IllegalStateException("postgres(...) is required: the ConnectionFactory or R2DBC URL of your "
            + "PostgreSQL, where the handler's tables are");
      }
      if (reset == null) {
        throw new IllegalStateException("reset(...) is required: SQL that restores the business tables' starting "
            + "state, run before every schedule");
      }
      if (probe == null) {
        throw new IllegalStateException("probe(...) is required: a query (ORDER BY) or lambda that reads the "
            + "business state the handler changes");
      }
      if (messages.isEmpty()) {
        throw new IllegalStateException("messages(...) is required: at least one message to feed the handler");
      }
      return new HandlerContract<>(new ContractSettings<>(name, handler, connectionFactory, url,
          List.copyOf(messages), messageId, reset, probe, sideEffects, inboxTable, stepTimeout));
    }
  }
}
