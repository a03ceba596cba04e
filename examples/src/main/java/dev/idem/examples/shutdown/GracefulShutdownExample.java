package dev.idem.examples.shutdown;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.GracefulShutdown;
import dev.idem.IdempotentConsumer;
import dev.idem.MessageMetadata;
import dev.idem.ShutdownReport;
import dev.idem.examples.DemoEnvironment;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import io.micrometer.observation.ObservationRegistry;
import io.r2dbc.pool.ConnectionPool;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Graceful shutdown, message metadata and tracing together, over RabbitMQ: the handler records
 * where each payment came from (queue, routing key, the producer's {@code traceparent}); the
 * consumer is stopped gracefully in the middle of the stream and a second run applies the rest.
 *
 * <p>Run: {@code mvn -q -pl examples -am package -DskipTests exec:java
 * -Dexec.mainClass=dev.idem.examples.shutdown.GracefulShutdownExample} (RabbitMQ needs a server,
 * see {@link DemoEnvironment}).
 */
public final class GracefulShutdownExample {

  /** Where the handler writes what it saw. */
  public static final String SEEN = "idem_demo_payments_seen";

  private GracefulShutdownExample() {}

  /**
   * What the example observed.
   *
   * @param published payments published
   * @param firstRun the first run's graceful stop
   * @param rows rows written over both runs
   * @param distinct distinct payment ids among them
   * @param withMetadata rows whose queue, routing key and trace header were seen by the handler
   */
  public record Report(long published, ShutdownReport firstRun, long rows, long distinct, long withMetadata) {

    /**
     * Whether each payment was applied once, with its metadata, and the stop rolled nothing back.
     *
     * @return {@code true} on success
     */
    public boolean ok() {
      return rows == published && distinct == published && withMetadata == published && firstRun.abandonedInFlight() == 0;
    }
  }

  /**
   * Runs the example and exits with 0 when every check passed.
   *
   * @param args flags, see {@link DemoEnvironment}
   */
  public static void main(String[] args) {
    Report report = run(DemoEnvironment.fromArgs(args));
    System.out.println(report);
    System.exit(report.ok() ? 0 : 1);
  }

  /**
   * The consumer: records each payment with where it came from.
   *
   * @param inbox the inbox
   * @param observations where traces go; {@link ObservationRegistry#NOOP} when tracing is off
   * @return the consumer
   */
  public static IdempotentConsumer<String> payments(PostgresInbox inbox, ObservationRegistry observations) {
    // tag::metadata-and-tracing[] (quoted in docs/operating.md)
    return IdempotentConsumer.<String>named("payments")
        .inbox(inbox)
        .handler((payload, tx) -> {
          MessageMetadata m = tx.metadata();
          return tx.sql("INSERT INTO " + SEEN + " (id, queue, routing_key, traceparent, attempt) VALUES ($1, $2, $3, $4, $5)")
              .bind(0, m.messageId())
              .bind(1, m.broker().get(MessageMetadata.RABBITMQ_QUEUE))
              .bind(2, m.broker().get(MessageMetadata.RABBITMQ_ROUTING_KEY))
              .bind(3, m.header("traceparent").orElse(""))
              .bind(4, m.deliveryAttempt())
              .execute();
        })
        .observationRegistry(observations) // one idem.message observation per message, continuing the producer's trace
        .build();
    // end::metadata-and-tracing[]
  }

  /**
   * Runs one consumer until some payments are applied, then stops it gracefully.
   *
   * @param payments the consumer
   * @param options the source options
   * @param atLeast how many outcomes to wait for before stopping
   * @return the stop's report
   */
  static ShutdownReport runThenStop(IdempotentConsumer<String> payments, RabbitSourceOptions options, long atLeast) {
    AtomicLong outcomes = new AtomicLong();
    // tag::graceful-shutdown[] (quoted in docs/operating.md)
    GracefulShutdown shutdown = GracefulShutdown.create();
    RabbitSource<String> source = RabbitSource.create(options, PayloadDecoder.utf8());
    Disposable running = payments.process(source.receive(), shutdown).subscribe(outcome -> outcomes.incrementAndGet());
    // ... later, on shutdown (a JVM shutdown hook, a SmartLifecycle's stop):
    waitFor(() -> outcomes.get() >= atLeast);
    ShutdownReport report = shutdown.stop(Duration.ofSeconds(20)).block(); // no new message starts; in-flight ones commit and ack
    source.close(); // after the stop: the acks went out on the still-open channel
    // end::graceful-shutdown[]
    running.dispose();
    return report;
  }

  /**
   * Runs the example.
   *
   * @param env services and flags ({@code --payments=}, default 300)
   * @return the report
   */
  public static Report run(DemoEnvironment env) {
    int published = env.intFlag("payments", 300);
    String queue = "idem_demo_shutdown_" + Long.toString(System.currentTimeMillis(), 36);
    ConnectionPool pool = PostgresConnections.pool(env.postgresUrl(), 8);
    ConnectionFactory factory = new ConnectionFactory();
    try (Connection admin = newConnection(factory, env.rabbitUri())) {
      RabbitTopology.declare(admin, queue, RabbitTopology.QueueType.CLASSIC);
      execute(pool, "DROP TABLE IF EXISTS " + SEEN, "CREATE TABLE " + SEEN
          + " (id text NOT NULL, queue text NOT NULL, routing_key text NOT NULL, traceparent text NOT NULL, attempt int NOT NULL)");
      PostgresInbox inbox = PostgresInbox.create(pool);
      inbox.createSchemaIfAbsent().block();
      try (Channel channel = admin.createChannel()) {
        channel.confirmSelect();
        for (int i = 0; i < published; i++) {
          String traceparent = String.format("00-%032x-%016x-01", i + 1, i + 1);
          AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId(queue + "-" + i).deliveryMode(2)
              .headers(Map.of("traceparent", traceparent)).build();
          channel.basicPublish("", queue, true, props, Integer.toString(100 + i).getBytes(StandardCharsets.UTF_8));
        }
        channel.waitForConfirmsOrDie(60_000);
      }
      RabbitSourceOptions options = RabbitSourceOptions.builder(queue).uri(env.rabbitUri()).prefetch(16).build();
      IdempotentConsumer<String> payments = payments(inbox, ObservationRegistry.NOOP);
      ShutdownReport first = runThenStop(payments, options, published / 3);
      // The second run takes what is left and stops once the queue is empty.
      waitForRows(pool, queue, published, payments, options);
      Report report = new Report(published, first,
          count(pool, "SELECT count(*) FROM " + SEEN + " WHERE id LIKE '" + queue + "-%'"),
          count(pool, "SELECT count(DISTINCT id) FROM " + SEEN + " WHERE id LIKE '" + queue + "-%'"),
          count(pool, "SELECT count(*) FROM " + SEEN + " WHERE id LIKE '" + queue + "-%' AND queue = '" + queue
              + "' AND routing_key = '" + queue + "' AND traceparent LIKE '00-%'"));
      RabbitTopology.delete(admin, queue);
      return report;
    } catch (java.io.IOException | java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("RabbitMQ failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    } finally {
      pool.dispose();
    }
  }

  private static void waitForRows(ConnectionPool pool, String queue, int published, IdempotentConsumer<String> payments,
      RabbitSourceOptions options) {
    GracefulShutdown shutdown = GracefulShutdown.create();
    RabbitSource<String> source = RabbitSource.create(options, PayloadDecoder.utf8());
    payments.process(source.receive(), shutdown).subscribe();
    waitFor(() -> count(pool, "SELECT count(DISTINCT id) FROM " + SEEN + " WHERE id LIKE '" + queue + "-%'") >= published);
    shutdown.stop(Duration.ofSeconds(20)).block();
    source.close();
  }

  private static Connection newConnection(ConnectionFactory factory, String uri) {
    try {
      factory.setUri(uri);
      return factory.newConnection("idem-shutdown-example");
    } catch (Exception e) {
      throw new IllegalStateException("cannot connect to RabbitMQ at " + uri + ": " + e, e);
    }
  }

  private static void waitFor(java.util.function.BooleanSupplier done) {
    // Polled on a thread that may block (the condition may query the database).
    Flux.interval(Duration.ofMillis(50)).onBackpressureDrop().publishOn(reactor.core.scheduler.Schedulers.boundedElastic(), 1)
        .filter(tick -> done.getAsBoolean()).next()
        .timeout(Duration.ofMinutes(2), Mono.error(() -> new IllegalStateException("the example did not finish in time")))
        .block();
  }

  private static void execute(ConnectionPool pool, String... sql) {
    Mono.usingWhen(pool.create(), c -> Flux.just(sql)
        .concatMap(s -> Mono.from(c.createStatement(s).execute()).flatMap(r -> Mono.from(r.getRowsUpdated())))
        .then(), io.r2dbc.spi.Connection::close).block();
  }

  private static long count(ConnectionPool pool, String sql) {
    return Mono.usingWhen(pool.create(),
        c -> Mono.from(c.createStatement(sql).execute()).flatMap(r -> Mono.from(r.map((row, meta) -> row.get(0, Long.class)))),
        io.r2dbc.spi.Connection::close).block();
  }
}
