package dev.idem.outbox;

import java.time.Instant;
import org.jspecify.annotations.Nullable;

/**
 * A parked outbox row: the relay gave up on it after its attempt limit. It stays in the table,
 * blocks later rows of its key under {@link RelayOrdering#BY_KEY}, and is sent again (with the
 * same id) after {@link PostgresOutbox#resend(String)} or {@link PostgresOutbox#resendParked()}.
 *
 * @param seq the row's sequence number
 * @param messageId the stable message id
 * @param destination where it was going
 * @param key the ordering key, or {@code null}
 * @param attempts publish attempts made
 * @param lastError the last attempt's error
 * @param createdAt when the row was written
 * @param parkedAt when it was parked
 */
public record ParkedMessage(long seq, String messageId, String destination, @Nullable String key, int attempts, String lastError,
    Instant createdAt, Instant parkedAt) {}
