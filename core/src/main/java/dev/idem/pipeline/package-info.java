/**
 * The stages of one consumer's pipeline, wired by {@link dev.idem.pipeline.Pipeline} from the
 * {@link dev.idem.pipeline.ConsumerSettings} its builder checked: dispatch to lanes, validation,
 * the transaction, the retry decision and settlement. Not API: user code reaches it only through
 * {@link dev.idem.IdempotentConsumer}. The stages read the API's types and the {@code internal}
 * machinery, never the facade.
 */
@NullMarked
package dev.idem.pipeline;

import org.jspecify.annotations.NullMarked;
