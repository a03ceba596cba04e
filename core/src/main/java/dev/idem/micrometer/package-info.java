/**
 * Micrometer publishers of the consumer's, the outbox relay's and retention's metrics:
 * {@link dev.idem.micrometer.MicrometerConsumerMetrics},
 * {@link dev.idem.micrometer.MicrometerOutboxMetrics} and
 * {@link dev.idem.micrometer.MicrometerRetentionMetrics}.
 */
@NullMarked
package dev.idem.micrometer;

import org.jspecify.annotations.NullMarked;
