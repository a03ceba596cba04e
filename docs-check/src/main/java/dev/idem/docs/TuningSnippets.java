package dev.idem.docs;

import dev.idem.BatchHandler;
import dev.idem.GracefulShutdown;
import dev.idem.IdempotentConsumer;
import dev.idem.kafka.KafkaSource;
import dev.idem.micrometer.MicrometerConsumerMetrics;
import dev.idem.micrometer.MicrometerOutboxMetrics;
import dev.idem.micrometer.MicrometerRetentionMetrics;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.postgres.PostgresInbox;
import dev.idem.rabbit.RabbitQueueMetrics;
import dev.idem.rabbit.RabbitSource;
import dev.idem.retention.Retention;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.time.Duration;

/**
 * Snippets of docs/batching.md and docs/operating.md, kept here so that they compile with the
 * build. Nothing here runs.
 */
@SuppressWarnings("unused")
final class TuningSnippets {

  private TuningSnippets() {}

  static IdempotentConsumer<Payment> batched(PostgresInbox inbox) {
    // tag::batching[]
    return IdempotentConsumer.<Payment>named("payments")
        .inbox(inbox)
        .handler(GettingStarted.creditAccount())
        .maxBatchSize(64)   // up to 64 messages that are already waiting share one transaction
        .concurrency(4)     // 4 lanes: at most 4 transactions at once; pool size at least 4
        .prefetch(256)      // concurrency x maxBatchSize, so that full batches can form
        .build();
    // end::batching[]
  }

  static IdempotentConsumer<Payment> batchedSetBased(PostgresInbox inbox) {
    return IdempotentConsumer.<Payment>named("payments")
        .inbox(inbox)
        .batchHandler(creditAccounts())
        .maxBatchSize(256)
        .concurrency(4)
        .prefetch(1024)
        .build();
  }

  // tag::batch-handler[]
  static BatchHandler<Payment> creditAccounts() {
    return (items, tx) -> {
      Long[] accounts = items.stream().map(item -> item.payload().accountId()).toArray(Long[]::new);
      Long[] amounts = items.stream().map(item -> item.payload().amountCents()).toArray(Long[]::new);
      return tx.sql("UPDATE accounts a SET balance = a.balance + d.amount"
          + " FROM (SELECT account, sum(amount) AS amount"
          + "       FROM unnest($1::bigint[], $2::bigint[]) AS t(account, amount) GROUP BY account) d"
          + " WHERE a.id = d.account")
          .bind(0, accounts).bind(1, amounts)
          .execute();
    };
  }
  // end::batch-handler[]

  static void shutdownHook(IdempotentConsumer<Payment> payments, KafkaSource<Payment> source) {
    // tag::shutdown-hook[]
    GracefulShutdown shutdown = GracefulShutdown.create();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      shutdown.stop(Duration.ofSeconds(20)).block();   // no new message starts; those in flight commit and settle
      source.close();                                  // Kafka: waits for the last offset commit (closeTimeout)
    }));
    payments.process(source.receive(), shutdown).blockLast();   // returns when the stop has completed the stream
    // end::shutdown-hook[]
  }

  static void metrics(PostgresInbox inbox, PostgresOutbox outbox, OutboxPublisher publisher,
      RabbitSource<Payment> rabbitSource, MeterRegistry registry, ObservationRegistry observations) {
    // tag::metrics[]
    IdempotentConsumer<Payment> payments = IdempotentConsumer.<Payment>named("payments")
        .inbox(inbox)
        .handler(GettingStarted.creditAccount())
        .metrics(new MicrometerConsumerMetrics(registry, "payments"))   // idem.* meters, tag consumer=payments
        .observationRegistry(observations)                              // one trace span per message
        .build();
    OutboxRelay relay = OutboxRelay.builder(outbox, publisher)
        .name("notifications")
        .metrics(new MicrometerOutboxMetrics(registry, "notifications"))
        .build();
    Retention retention = Retention.builder()
        .inbox(inbox, Duration.ofDays(14))
        .metrics(new MicrometerRetentionMetrics(registry))
        .build();
    RabbitQueueMetrics.of(rabbitSource).bindTo(registry);               // queue depth, unsettled
    // end::metrics[]
  }
}
