/**
 * The outbox: messages for effects that cannot join the database transaction (publishing to a
 * broker, e-mail, webhooks), written in the handler's transaction with
 * {@link dev.idem.Tx#outbox} and sent after commit by an {@link dev.idem.outbox.OutboxRelay}
 * through an {@link dev.idem.outbox.OutboxPublisher}, at least once, each with a stable id that
 * downstream consumers deduplicate on.
 */
@NullMarked
package dev.idem.outbox;

import org.jspecify.annotations.NullMarked;
