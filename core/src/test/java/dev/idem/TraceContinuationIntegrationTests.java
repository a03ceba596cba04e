package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import brave.Tracing;
import brave.handler.MutableSpan;
import brave.handler.SpanHandler;
import brave.propagation.ThreadLocalCurrentTraceContext;
import brave.propagation.TraceContext;
import brave.sampler.Sampler;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.micrometer.observation.ObservationHandler;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.brave.bridge.BraveBaggageManager;
import io.micrometer.tracing.brave.bridge.BraveCurrentTraceContext;
import io.micrometer.tracing.brave.bridge.BravePropagator;
import io.micrometer.tracing.brave.bridge.BraveTracer;
import io.micrometer.tracing.brave.bridge.W3CPropagation;
import io.micrometer.tracing.handler.DefaultTracingObservationHandler;
import io.micrometer.tracing.handler.PropagatingReceiverTracingObservationHandler;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.publisher.Flux;

/**
 * With a real tracer (Micrometer Tracing's Brave bridge, W3C propagation) each message's trace
 * continues the producer's {@code traceparent}: the consumer's spans have its trace id and the
 * producer's span as parent, and the handler runs inside that trace.
 */
class TraceContinuationIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private final List<MutableSpan> spans = new CopyOnWriteArrayList<>();
  private ConnectionPool pool;
  private PostgresInbox inbox;
  private String effects;
  private String consumer;
  private Tracing tracing;
  private BraveTracer tracer;
  private ObservationRegistry registry;

  @BeforeEach
  void setUp() {
    pool = postgres.pool(8);
    inbox = PostgresInbox.create(pool, PostgresService.uniqueName("inbox"));
    inbox.createSchemaIfAbsent().block(TIMEOUT);
    effects = PostgresService.uniqueName("effects");
    consumer = PostgresService.uniqueName("consumer");
    postgres.execute("CREATE TABLE " + effects + " (message_id text NOT NULL, trace_id text NOT NULL)");

    ThreadLocalCurrentTraceContext braveContext = ThreadLocalCurrentTraceContext.newBuilder().build();
    tracing = Tracing.newBuilder()
        .currentTraceContext(braveContext)
        .propagationFactory(new W3CPropagation())
        .sampler(Sampler.ALWAYS_SAMPLE)
        .addSpanHandler(new SpanHandler() {
          @Override
          public boolean end(TraceContext context, MutableSpan span, Cause cause) {
            spans.add(span);
            return true;
          }
        })
        .build();
    tracer = new BraveTracer(tracing.tracer(), new BraveCurrentTraceContext(braveContext), new BraveBaggageManager());
    registry = ObservationRegistry.create();
    registry.observationConfig().observationHandler(new ObservationHandler.FirstMatchingCompositeObservationHandler(
        new PropagatingReceiverTracingObservationHandler<>(tracer, new BravePropagator(tracing)),
        new DefaultTracingObservationHandler(tracer)));
  }

  @AfterEach
  void tearDown() {
    tracing.close();
    postgres.execute("DROP TABLE IF EXISTS " + effects, "DROP TABLE IF EXISTS " + inbox.table());
    pool.dispose();
  }

  private static String traceId(int i) {
    return String.format("4bf92f3577b34da6a3ce929d0e0e%04x", i);
  }

  private static String producerSpanId(int i) {
    return String.format("%016x", 0xdef000L + i);
  }

  @ParameterizedTest(name = "maxBatchSize={0}")
  @ValueSource(ints = {1, 8})
  void eachMessagesSpansContinueTheProducersTraceFromItsTraceparentHeader(int maxBatchSize) {
    int n = 10;
    List<MetadataAndTracingIntegrationTests.RichDelivery> deliveries = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      deliveries.add(new MetadataAndTracingIntegrationTests.RichDelivery("m-" + i, i,
          Map.of("traceparent", "00-" + traceId(i) + "-" + producerSpanId(i) + "-01", "trace", "t-" + i)));
    }
    Map<String, String> traceSeenByHandler = new ConcurrentHashMap<>();

    List<Outcome<Integer>> outcomes = IdempotentConsumer.<Integer>named(consumer).inbox(inbox)
        .handler((value, tx) -> {
          Span current = tracer.currentSpan();
          String seen = current == null ? "none" : current.context().traceId();
          traceSeenByHandler.put(tx.messageId(), seen);
          return tx.sql("INSERT INTO " + effects + " (message_id, trace_id) VALUES ($1, $2)")
              .bind(0, tx.messageId()).bind(1, seen).execute();
        })
        .maxBatchSize(maxBatchSize).ordering(Ordering.UNORDERED).concurrency(2)
        .observationRegistry(registry)
        .build().process(Flux.fromIterable(deliveries)).collectList().block(TIMEOUT);

    assertThat(outcomes).hasSize(n);
    for (int i = 0; i < n; i++) {
      String id = "m-" + i;
      assertThat(traceSeenByHandler.get(id)).as("trace id in the handler of %s", id).isEqualTo(traceId(i));
      assertThat(postgres.count("SELECT count(*) FROM " + effects + " WHERE message_id = $1 AND trace_id = $2", id, traceId(i)))
          .isEqualTo(1);
      int index = i;
      List<MutableSpan> messageSpans = spans.stream()
          .filter(s -> (consumer + " process").equals(s.name()) && id.equals(s.tag(IdemObservations.MESSAGE_ID))).toList();
      assertThat(messageSpans).as("spans of %s", id).hasSize(1);
      MutableSpan span = messageSpans.get(0);
      assertThat(span.traceId()).isEqualTo(traceId(index));
      assertThat(span.parentId()).isEqualTo(producerSpanId(index));
      assertThat(span.kind()).isEqualTo(brave.Span.Kind.CONSUMER);
      assertThat(span.tag(IdemObservations.OUTCOME)).isEqualTo("PROCESSED");
    }
    // Every span the consumer made belongs to one of the producers' traces.
    List<String> producerTraces = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      producerTraces.add(traceId(i));
    }
    assertThat(spans).isNotEmpty().allSatisfy(s -> assertThat(s.traceId()).isIn(producerTraces));
  }
}
