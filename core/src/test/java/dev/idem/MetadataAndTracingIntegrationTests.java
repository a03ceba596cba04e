package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.internal.MessageObservations;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.contextpropagation.ObservationThreadLocalAccessor;
import io.micrometer.observation.tck.TestObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistryAssert;
import io.micrometer.observation.transport.ReceiverContext;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * What the handler sees of its message ({@link Tx#metadata()}, {@link BatchItem#metadata()}) and
 * the observations of a consumer with an {@link ObservationRegistry}, against a real PostgreSQL.
 */
class MetadataAndTracingIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
  private static final String TRACEPARENT = "00-" + TRACE_ID + "-00f067aa0ba902b7-01";

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private String consumer;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(8);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL, k text, part text, trace text, attempt int, "
        + "at timestamptz, broker text)");
  }

  @AfterEach
  void tearDown() {
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  /** A delivery with every piece of metadata set. */
  static final class RichDelivery extends AbstractDelivery<Integer> {
    final String id;
    final int value;
    final Map<String, String> headers;
    final List<String> acks = new CopyOnWriteArrayList<>();

    RichDelivery(String id, int value, Map<String, String> headers) {
      this.id = id;
      this.value = value;
      this.headers = headers;
    }

    @Override
    public String id() {
      return id;
    }

    @Override
    public Integer payload() {
      return value;
    }

    @Override
    public Map<String, String> headers() {
      return headers;
    }

    @Override
    public String orderingKey() {
      return "key-" + id;
    }

    @Override
    public String partition() {
      return "topic-" + (value % 2);
    }

    @Override
    public Instant timestamp() {
      return Instant.ofEpochSecond(1_700_000_000L + value);
    }

    @Override
    public int deliveryAttempt() {
      return 3;
    }

    @Override
    public Map<String, String> brokerCoordinates() {
      return Map.of("test.position", Integer.toString(value));
    }

    @Override
    protected Mono<Void> doAck() {
      return Mono.fromRunnable(() -> acks.add(id));
    }

    @Override
    protected Mono<Void> doDeadLetter(DeadLetter deadLetter) {
      return Mono.error(new IllegalStateException("not expected: " + deadLetter));
    }
  }

  private static List<RichDelivery> deliveries(int n) {
    List<RichDelivery> all = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      all.add(new RichDelivery("m-" + i, i, Map.of("traceparent", TRACEPARENT, "trace", "t-" + i)));
    }
    return all;
  }

  private Mono<Long> recordMetadata(MessageMetadata m, Tx tx) {
    return Mono.from(tx.sql("INSERT INTO " + effects + " (message_id, k, part, trace, attempt, at, broker) "
        + "VALUES ($1, $2, $3, $4, $5, $6, $7)")
        .bind(0, m.messageId()).bind(1, m.key().orElseThrow()).bind(2, m.partition().orElseThrow())
        .bind(3, m.header("trace").orElseThrow()).bind(4, m.deliveryAttempt())
        .bind(5, m.timestamp().orElseThrow().atOffset(java.time.ZoneOffset.UTC))
        .bind(6, m.broker().get("test.position"))
        .execute());
  }

  private void assertEachHandlerSawItsOwnMetadata(int n) {
    assertThat(postgres.count("SELECT count(*) FROM " + effects)).isEqualTo(n);
    for (int i = 0; i < n; i++) {
      List<Map<String, Object>> rows = postgres
          .query("SELECT k, part, trace, attempt, broker, extract(epoch FROM at)::bigint AS epoch FROM "
              + effects + " WHERE message_id = $1", "m-" + i);
      assertThat(rows).hasSize(1);
      assertThat(rows.get(0)).containsEntry("k", "key-m-" + i).containsEntry("part", "topic-" + (i % 2))
          .containsEntry("trace", "t-" + i).containsEntry("attempt", 3).containsEntry("broker", Integer.toString(i))
          .containsEntry("epoch", 1_700_000_000L + i);
    }
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void eachHandlerSeesItsOwnMessagesHeadersKeyAttemptAndBrokerCoordinates(int maxBatchSize) {
    List<RichDelivery> deliveries = deliveries(30);
    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .handler((value, tx) -> recordMetadata(tx.metadata(), tx))
        .maxBatchSize(maxBatchSize).ordering(Ordering.UNORDERED).concurrency(2)
        .build().process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(30).allMatch(o -> o.status() == Outcome.Status.PROCESSED);
    assertEachHandlerSawItsOwnMetadata(30);
  }

  @Test
  void aBatchHandlerReadsEachItemsMetadataAndItsTxHasNoSingleMessage() {
    List<RichDelivery> deliveries = deliveries(20);
    List<Throwable> batchTxMetadata = new CopyOnWriteArrayList<>();
    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .batchHandler((items, tx) -> {
          try {
            tx.metadata();
          } catch (RuntimeException e) {
            batchTxMetadata.add(e);
          }
          return Flux.fromIterable(items).concatMap(item -> recordMetadata(item.metadata(), tx));
        })
        .maxBatchSize(8).concurrency(1)
        .build().process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(20);
    assertEachHandlerSawItsOwnMetadata(20);
    // Batches of several messages have no single message's metadata (batches of one use the message's own handle).
    assertThat(batchTxMetadata).allMatch(e -> e instanceof IllegalStateException);
  }

  @Test
  void aTxOfAnotherImplementationSaysItHasNoMetadata() {
    Tx foreign = new Tx() {
      @Override
      public io.r2dbc.spi.Connection connection() {
        return null;
      }

      @Override
      public String messageId() {
        return "x";
      }

      @Override
      public String consumer() {
        return "c";
      }
    };
    assertThatThrownBy(foreign::metadata).isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("metadata");
  }

  /**
   * Records every stopped observation, and does what a tracing bridge's receiver handler does:
   * reads the W3C header through the receiver context's getter.
   */
  static final class Probe implements ObservationHandler<Observation.Context> {
    final Map<String, String> traceparentByMessage = new ConcurrentHashMap<>();
    final List<Observation.Context> stopped = new CopyOnWriteArrayList<>();

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public void onStart(Observation.Context context) {
      if (context instanceof ReceiverContext<?> receiver) {
        ReceiverContext raw = receiver;
        Object carrier = raw.getCarrier();
        String traceparent = raw.getGetter().get(carrier, "traceparent");
        traceparentByMessage.put(((Delivery<?>) carrier).id(), String.valueOf(traceparent));
      }
    }

    @Override
    public void onStop(Observation.Context context) {
      stopped.add(context);
    }

    @Override
    public boolean supportsContext(Observation.Context context) {
      return true;
    }
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void eachMessageIsObservedWithItsTransactionAndSettlementAndTheHandlerRunsInsideIt(int maxBatchSize) {
    TestObservationRegistry registry = TestObservationRegistry.create();
    Probe probe = new Probe();
    registry.observationConfig().observationHandler(probe);
    Map<String, String> currentInHandler = new ConcurrentHashMap<>();
    Map<String, String> inReactorContext = new ConcurrentHashMap<>();
    List<RichDelivery> deliveries = deliveries(12);

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .handler((value, tx) -> {
          Observation current = registry.getCurrentObservation();
          currentInHandler.put(tx.messageId(), current == null ? "none" : current.getContext().getName());
          return Mono.deferContextual(context -> {
            Object o = context.getOrDefault(ObservationThreadLocalAccessor.KEY, null);
            inReactorContext.put(tx.messageId(), o instanceof Observation obs ? obs.getContext().getName() : "none");
            return recordMetadata(tx.metadata(), tx);
          });
        })
        .maxBatchSize(maxBatchSize).ordering(Ordering.UNORDERED).concurrency(2)
        .observationRegistry(registry)
        .build().process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(12);
    assertThat(MessageObservations.CURRENT).isEqualTo(ObservationThreadLocalAccessor.KEY);
    TestObservationRegistryAssert.assertThat(registry)
        .hasNumberOfObservationsWithNameEqualTo(IdemObservations.MESSAGE, 12)
        .hasObservationWithNameEqualTo(IdemObservations.MESSAGE).that()
        .hasContextualNameEqualTo(consumer + " process")
        .hasLowCardinalityKeyValue(IdemObservations.CONSUMER, consumer)
        .hasLowCardinalityKeyValue(IdemObservations.OUTCOME, "PROCESSED")
        .hasBeenStarted().hasBeenStopped();
    // The producer's trace context is read from the headers for every message.
    assertThat(probe.traceparentByMessage).hasSize(12)
        .allSatisfy((id, traceparent) -> assertThat(traceparent).isEqualTo(TRACEPARENT));
    List<Observation.Context> contexts = probe.stopped;
    if (maxBatchSize == 1) {
      assertThat(contexts.stream().filter(c -> c.getName().equals(IdemObservations.TRANSACTION)))
          .hasSize(12)
          .allSatisfy(c -> assertThat(c.getParentObservation().getContextView().getName()).isEqualTo(IdemObservations.MESSAGE));
      assertThat(contexts.stream().filter(c -> c.getName().equals(IdemObservations.SETTLE))).hasSize(12);
      assertThat(currentInHandler).hasSize(12).allSatisfy((id, name) -> assertThat(name).isEqualTo(IdemObservations.TRANSACTION));
      assertThat(inReactorContext).isEqualTo(currentInHandler);
    } else {
      // Batched: the message observation itself is current in its handler, the transaction and settlement are events on
      // it; a batch of one message runs the per-message path, with the transaction observation current.
      assertThat(currentInHandler).hasSize(12)
          .allSatisfy((id, name) -> assertThat(name).isIn(IdemObservations.MESSAGE, IdemObservations.TRANSACTION));
      assertThat(inReactorContext).isEqualTo(currentInHandler);
      assertThat(contexts.stream().filter(c -> c.getName().equals(IdemObservations.MESSAGE)))
          .allSatisfy(c -> assertThat(c.getHighCardinalityKeyValue(IdemObservations.MESSAGE_ID)).isNotNull());
    }
  }

  @Test
  void withoutARegistryNoObservationIsCreatedOrMadeCurrent() {
    Map<String, Boolean> observed = new ConcurrentHashMap<>();
    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .handler((value, tx) -> Mono.deferContextual(context -> {
          observed.put(tx.messageId(), context.hasKey(ObservationThreadLocalAccessor.KEY));
          return recordMetadata(tx.metadata(), tx);
        }))
        .build().process(Flux.fromIterable(deliveries(5))).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(5);
    assertThat(observed).hasSize(5).allSatisfy((id, present) -> assertThat(present).isFalse());
  }
}
