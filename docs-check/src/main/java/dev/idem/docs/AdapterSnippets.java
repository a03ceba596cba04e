package dev.idem.docs;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.Outcome;
import dev.idem.kafka.DeadLetterRecord;
import dev.idem.kafka.KafkaDeadLetterReplayer;
import dev.idem.kafka.KafkaRedeliveryHorizon;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.DeadLetteredMessage;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitDeadLetterReplayer;
import dev.idem.rabbit.RabbitRedeliveryHorizon;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.retention.Retention;
import io.micrometer.core.instrument.MeterRegistry;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import reactor.core.publisher.Flux;

/**
 * Snippets of docs/kafka.md, docs/rabbitmq.md, docs/retention.md and docs/operating.md that belong
 * to no example, kept here so that they compile with the build. Nothing here runs.
 */
@SuppressWarnings("unused")
final class AdapterSnippets {

  private AdapterSnippets() {}

  static void retention(PostgresInbox inbox, PostgresOutbox outbox, String bootstrapServers,
      KafkaSource<Payment> source, IdempotentConsumer<Payment> payments) {
    // tag::retention[]
    Retention retention = Retention.builder()
        .inbox(inbox, Duration.ofDays(14))
        .outbox(outbox, Duration.ofDays(2))                                   // sent rows only
        .checkedAgainst(KafkaRedeliveryHorizon.of(bootstrapServers, "payments"))
        .build();
    source.receive().transform(payments::process).transform(retention::alongside).subscribe();
    // end::retention[]
  }

  static void rotatingRetention(ConnectionPool pool, RabbitSource<Payment> source, IdempotentConsumer.Builder<Payment> builder) {
    // tag::rotating-retention[]
    // Ids kept 14 days in 16 daily slots (14 periods + 2); the layout row says (86400000, 16).
    PostgresInbox inbox = PostgresInbox.rotating(pool, "processed_ids", Duration.ofDays(14), 14);
    IdempotentConsumer<Payment> payments = builder.inbox(inbox).build();
    Retention retention = Retention.builder()
        .inbox(inbox, Duration.ofDays(14))                   // at most the layout's window
        .checkedAgainst(RabbitRedeliveryHorizon.messageTtl("payments", Duration.ofDays(7)))  // a TTL set by policy
        .build();                                            // interval 1 min: at most half the period
    source.receive().transform(payments::process).transform(retention::alongside).subscribe();
    // end::rotating-retention[]
  }

  static KafkaSource<Payment> kafka(MeterRegistry registry) {
    // tag::kafka-source[]
    KafkaSource<Payment> source = KafkaSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers("localhost:9092").groupId("payments").topics("payments")
        .valueDeserializer(new Payment.KafkaDeserializer())
        .meterRegistry(registry)                      // optional: Kafka client metrics, lag included
        .build());
    // end::kafka-source[]
    return source;
  }

  static Flux<Outcome<Payment>> kafkaShareGroup(PostgresInbox inbox, Handler<Payment> handler) {
    // tag::kafka-share-source[]
    KafkaShareSource<Payment> source = KafkaShareSource.create(KafkaSourceOptions.<Payment>builder()
        .bootstrapServers("localhost:9092").groupId("payments-queue").topics("payments")
        .valueDeserializer(new Payment.KafkaDeserializer())
        .build(), 2);                                 // two share consumers in this process
    IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named("payments")
        .inbox(inbox).handler(handler)
        .ordering(Ordering.UNORDERED)                 // a share group keeps no order
        .build();
    Flux<Outcome<Payment>> outcomes = payments.process(source.receive());
    // end::kafka-share-source[]
    return outcomes;
  }

  static RabbitSource<String> rabbit() throws Exception {
    // tag::rabbit-source[]
    ConnectionFactory factory = new ConnectionFactory();   // com.rabbitmq.client, for declaring the topology
    factory.setUri("amqp://guest:guest@localhost:5672");
    try (Connection connection = factory.newConnection("refunds-setup")) {
      RabbitTopology.declare(connection, "refunds", RabbitTopology.QueueType.QUORUM);   // queue, refunds.dlx, refunds.dlq
    }
    RabbitSource<String> source = RabbitSource.create(
        RabbitSourceOptions.builder("refunds").uri("amqp://guest:guest@localhost:5672").prefetch(32).build(),
        PayloadDecoder.utf8());
    // end::rabbit-source[]
    return source;
  }

  static void replay() {
    // tag::replay[]
    // Kafka: opens its clients for the call and closes them; the dead letters stay on the topic.
    long n = KafkaDeadLetterReplayer.create("localhost:9092")
        .replay("payments.DLT", (DeadLetterRecord r) -> "RETRIES_EXHAUSTED".equals(r.reason()));
    // RabbitMQ: holds a connection until closed; each replayed dead letter leaves the queue.
    try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create("amqp://guest:guest@localhost:5672")) {
      long m = replayer.replay("refunds.dlq", (DeadLetteredMessage d) -> "refund-7".equals(d.messageId())).block();
    }
    // end::replay[]
  }
}
