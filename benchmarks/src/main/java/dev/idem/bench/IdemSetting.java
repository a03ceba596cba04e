package dev.idem.bench;

import dev.idem.BatchHandler;
import dev.idem.BatchItem;
import dev.idem.ConsumerMetrics;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.postgres.PostgresInbox;
import java.util.List;

/**
 * One Idem configuration of the table.
 *
 * @param id the row id
 * @param ordering the ordering
 * @param concurrency messages (per-message mode) or batches (batch mode) in flight; also the pool size
 * @param prefetch core's prefetch, and the adapter's (Kafka {@code max.poll.records}, RabbitMQ {@code basic.qos})
 * @param maxBatchSize 1 for per-message mode
 * @param setBased whether the effect is the set-based {@link BatchHandler} rather than the per-message {@link Handler}
 */
record IdemSetting(String id, Ordering ordering, int concurrency, int prefetch, int maxBatchSize, boolean setBased) {

  /** The Idem rows of the throughput table. */
  static List<IdemSetting> throughputRows() {
    return List.of(
        new IdemSetting("4a", Ordering.UNORDERED, 16, 64, 1, false),
        oldDefaults("4b"),
        defaults("4c"),
        defaults("4d").withBatchHandler(),
        new IdemSetting("5a", Ordering.BY_KEY, 4, 256, 64, false),
        new IdemSetting("5b", Ordering.BY_KEY, 4, 256, 64, true),
        new IdemSetting("5c", Ordering.BY_KEY, 4, 1024, 256, false),
        new IdemSetting("5d", Ordering.BY_KEY, 4, 1024, 256, true));
  }

  /** Idem's defaults before batching was on by default: BY_KEY, concurrency 8, prefetch 32, {@code maxBatchSize(1)}. */
  static IdemSetting oldDefaults(String id) {
    return new IdemSetting(id, Ordering.BY_KEY, 8, 32, 1, false);
  }

  /** This setting with another order. */
  IdemSetting withOrdering(Ordering order) {
    return new IdemSetting(id, order, concurrency, prefetch, maxBatchSize, setBased);
  }

  /** This setting with the set-based {@link BatchHandler}. */
  IdemSetting withBatchHandler() {
    return new IdemSetting(id, ordering, concurrency, prefetch, maxBatchSize, true);
  }

  /** Idem's defaults ({@code IdempotentConsumer.DEFAULT_*}: BY_KEY, concurrency 8, prefetch 1024, batches of up to 128) with the per-message {@link Handler}. */
  static IdemSetting defaults(String id) {
    return new IdemSetting(id, IdempotentConsumer.DEFAULT_ORDERING, IdempotentConsumer.DEFAULT_CONCURRENCY,
        IdempotentConsumer.DEFAULT_PREFETCH, IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, false);
  }

  String label() {
    String order = ordering == Ordering.BY_KEY ? "BY_KEY" : ordering.name();
    boolean defaults = ordering == IdempotentConsumer.DEFAULT_ORDERING && concurrency == IdempotentConsumer.DEFAULT_CONCURRENCY
        && prefetch == IdempotentConsumer.DEFAULT_PREFETCH && maxBatchSize == IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE;
    boolean old = equals(oldDefaults(id));
    String suffix = defaults ? " (defaults)" : old ? " (old defaults)" : "";
    if (maxBatchSize <= 1) {
      return "Idem per message, " + order + " c" + concurrency + " p" + prefetch + suffix;
    }
    return "Idem batch " + maxBatchSize + ", " + (setBased ? "BatchHandler" : "Handler") + ", " + order + " c" + concurrency
        + " p" + prefetch
        + suffix;
  }

  IdempotentConsumer<Payment> consumer(String name, PostgresInbox inbox, String accountsTable, ConsumerMetrics metrics) {
    IdempotentConsumer.Builder<Payment> builder = IdempotentConsumer.<Payment>named(name).inbox(inbox)
        .ordering(ordering).concurrency(concurrency).prefetch(prefetch).maxBatchSize(maxBatchSize).metrics(metrics);
    return (setBased ? builder.batchHandler(setBasedCredit(accountsTable)) : builder.handler(credit(accountsTable))).build();
  }

  /** The seeds' effect: one UPDATE per message. */
  static Handler<Payment> credit(String accountsTable) {
    String sql = "UPDATE " + accountsTable + " SET balance = balance + $1 WHERE id = $2";
    return (payment, tx) -> tx.sql(sql).bind(0, payment.amountCents()).bind(1, payment.account()).execute();
  }

  /** The same effect for a batch: one UPDATE of the per-account sums. */
  static BatchHandler<Payment> setBasedCredit(String accountsTable) {
    String sql = "UPDATE " + accountsTable + " a SET balance = a.balance + d.amount"
        + " FROM (SELECT account, sum(amount) AS amount FROM unnest($1::bigint[], $2::bigint[]) AS e(account, amount)"
        + " GROUP BY account) d WHERE a.id = d.account";
    return (items, tx) -> {
      Long[] accounts = new Long[items.size()];
      Long[] amounts = new Long[items.size()];
      for (int i = 0; i < items.size(); i++) {
        BatchItem<Payment> item = items.get(i);
        accounts[i] = (long) item.payload().account();
        amounts[i] = item.payload().amountCents();
      }
      return tx.sql(sql).bind(0, accounts).bind(1, amounts).execute();
    };
  }
}
