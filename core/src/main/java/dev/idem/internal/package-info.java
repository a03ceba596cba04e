/**
 * The machinery under the pipeline and the adapters: lanes, the transaction runner, the stop
 * control, log text, JVM error handling. Not API; it may change in any release. It never imports
 * the pipeline ({@code dev.idem.pipeline}) or the facade ({@link dev.idem.IdempotentConsumer}).
 */
@NullMarked
package dev.idem.internal;

import org.jspecify.annotations.NullMarked;
