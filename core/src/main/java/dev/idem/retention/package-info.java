/**
 * Retention: {@link dev.idem.retention.Retention} removes processed ids (and sent outbox rows)
 * older than a window, on a schedule, and refuses a window shorter than the broker's
 * {@link dev.idem.retention.RedeliveryHorizon redelivery horizon}.
 */
@NullMarked
package dev.idem.retention;

import org.jspecify.annotations.NullMarked;
