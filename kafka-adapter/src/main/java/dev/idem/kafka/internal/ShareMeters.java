package dev.idem.kafka.internal;

import org.apache.kafka.clients.consumer.ShareConsumer;
import org.jspecify.annotations.Nullable;

/**
 * What one share consumer reports to meters: its client's metrics, the records it holds, the
 * locks it renewed and the locks it lost. {@link #NONE} when the options name no meter registry;
 * the Micrometer implementation ({@link MicrometerShareMeters}) is loaded only when they do.
 */
interface ShareMeters {

  /** Reports nothing. */
  ShareMeters NONE = new ShareMeters() {};

  /**
   * Meters for the share consumers of a source.
   *
   * @param registry an {@code io.micrometer.core.instrument.MeterRegistry}, or null for none
   * @param group the share group, the meters' {@code idem.source} tag
   * @param index which of the source's consumers, the meters' {@code idem.share.consumer} tag
   * @return the meters
   */
  static ShareMeters of(@Nullable Object registry, String group, int index) {
    return registry == null ? NONE : new MicrometerShareMeters(registry, group, index);
  }

  /** Binds the consumer's client metrics (refreshed as the client adds some) until {@link #unbind()}. */
  default void bind(ShareConsumer<?, ?> consumer) {}

  /** Removes the meters bound to the consumer. */
  default void unbind() {}

  /** How many records the consumer holds an acquisition lock on now. */
  default void held(int records) {}

  /** The consumer renewed the locks of so many records. */
  default void renewed(int records) {}

  /** The consumer lost the locks of so many records (a renewal refused or overtaken): they are delivered again. */
  default void lost(int records) {}
}
