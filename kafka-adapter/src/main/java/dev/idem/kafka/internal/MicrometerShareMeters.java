package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaShareSource;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.jspecify.annotations.Nullable;

/**
 * {@link ShareMeters} on Micrometer. Micrometer's {@code KafkaClientMetrics} binds consumers,
 * producers and admin clients but not share consumers, so the client's metrics are bound here
 * the way it binds a consumer's: a {@code consumer-share-fetch-manager-metrics} metric named
 * {@code records-consumed-total} becomes {@code kafka.consumer.share.fetch.manager.records.consumed.total},
 * a function counter when its name ends in {@code total}, else a gauge, tagged with the metric's
 * own tags and {@code idem.source}. Metrics the client adds later (per topic) are bound when the
 * loop reports next, at most every 30 s.
 */
final class MicrometerShareMeters implements ShareMeters {

  private static final long REFRESH_NANOS = TimeUnit.SECONDS.toNanos(30);

  private final MeterRegistry registry;
  private final List<Tag> tags;
  private final AtomicInteger held = new AtomicInteger();
  private final Counter renewed;
  private final Counter lost;
  private final Meter heldGauge;
  private final List<Meter> clientMeters = new ArrayList<>();
  private final Set<MetricName> bound = new HashSet<>();
  private @Nullable ShareConsumer<?, ?> consumer;
  private long refreshedAt;

  MicrometerShareMeters(Object registry, String group, int index) {
    this.registry = (MeterRegistry) registry;
    this.tags = List.of(Tag.of(MicrometerBinding.TAG, group));
    this.heldGauge = Gauge.builder(KafkaShareSource.HELD_RECORDS_METRIC, held, AtomicInteger::get).tags(tags)
        .tag("idem.share.consumer", Integer.toString(index))
        .description("Records this share consumer holds an acquisition lock on").register(this.registry);
    this.renewed = Counter.builder(KafkaShareSource.RENEWED_LOCKS_METRIC).tags(tags)
        .description("Acquisition locks renewed for records still in flight at half their lock").register(this.registry);
    this.lost = Counter.builder(KafkaShareSource.LOST_LOCKS_METRIC).tags(tags)
        .description("Acquisition locks lost while records were in flight; the broker delivers them again")
        .register(this.registry);
  }

  @Override
  public void bind(ShareConsumer<?, ?> consumer) {
    this.consumer = consumer;
    refresh();
  }

  /** Removes this consumer's meters (the counters stay: they count for the whole source); safe to call again. */
  @Override
  public void unbind() {
    held.set(0);
    clientMeters.forEach(registry::remove);
    clientMeters.clear();
    bound.clear();
    registry.remove(heldGauge);
    consumer = null;
  }

  @Override
  public void held(int records) {
    held.set(records);
    if (consumer != null && System.nanoTime() - refreshedAt > REFRESH_NANOS) {
      refresh();
    }
  }

  @Override
  public void renewed(int records) {
    renewed.increment(records);
  }

  @Override
  public void lost(int records) {
    lost.increment(records);
  }

  private void refresh() {
    refreshedAt = System.nanoTime();
    ShareConsumer<?, ?> c = Objects.requireNonNull(consumer, "refreshed while bound");
    for (Map.Entry<MetricName, ? extends Metric> entry : c.metrics().entrySet()) {
      MetricName name = entry.getKey();
      if (!bound.add(name) || !(entry.getValue().metricValue() instanceof Number)) {
        continue;
      }
      Metric metric = entry.getValue();
      String meterName = meterName(name);
      List<Tag> meterTags = new ArrayList<>(tags);
      name.tags().forEach((key, value) -> meterTags.add(Tag.of(key, value)));
      Meter meter = meterName.endsWith("total")
          ? FunctionCounter.builder(meterName, metric, MicrometerShareMeters::value).tags(meterTags)
              .description(name.description()).register(registry)
          : Gauge.builder(meterName, metric, MicrometerShareMeters::value).tags(meterTags)
              .description(name.description()).register(registry);
      clientMeters.add(meter);
    }
  }

  /** {@code consumer-share-fetch-manager-metrics} / {@code records-consumed-total} to {@code kafka.consumer.share.fetch.manager.records.consumed.total}. */
  static String meterName(MetricName name) {
    String group = name.group().endsWith("-metrics")
        ? name.group().substring(0, name.group().length() - "-metrics".length())
        : name.group();
    return ("kafka." + group + "." + name.name()).replace('-', '.');
  }

  private static double value(Metric metric) {
    return metric.metricValue() instanceof Number n ? n.doubleValue() : Double.NaN;
  }
}
