/**
 * Idem's API: {@link dev.idem.IdempotentConsumer} and what a user writes or reads around it
 * ({@link dev.idem.Handler}, {@link dev.idem.BatchHandler}, {@link dev.idem.Tx},
 * {@link dev.idem.Delivery}, {@link dev.idem.Outcome}, {@link dev.idem.RetryPolicy}, ...).
 *
 * <p>Package rules, for every Idem module: the root packages ({@code dev.idem},
 * {@code dev.idem.postgres}, {@code dev.idem.outbox}, {@code dev.idem.retention},
 * {@code dev.idem.micrometer}, {@code dev.idem.kafka}, {@code dev.idem.rabbit},
 * {@code dev.idem.spring}, {@code dev.idem.spring.test}, {@code dev.idem.test}) are the API.
 * {@code dev.idem.pipeline} holds the consumer's stages and every {@code internal} package the
 * machinery under them; neither is API, and either may change in any release. Only the facade,
 * {@link dev.idem.IdempotentConsumer}, imports the pipeline; the pipeline never imports the
 * facade, and {@code internal} imports neither (internal types may implement API interfaces, as
 * the transaction handle implements {@link dev.idem.Tx}). Each jar names its module in its
 * manifest ({@code Automatic-Module-Name}).
 */
@NullMarked
package dev.idem;

import org.jspecify.annotations.NullMarked;
