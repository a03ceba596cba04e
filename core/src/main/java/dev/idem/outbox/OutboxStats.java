package dev.idem.outbox;

import java.time.Duration;

/**
 * What waits in an outbox, from {@link PostgresOutbox#stats()}.
 *
 * @param pending rows not yet sent (including rows waiting for a retry)
 * @param oldestPendingAge how long the oldest pending row has waited; zero when none waits
 * @param parked rows the relay gave up on
 */
public record OutboxStats(long pending, Duration oldestPendingAge, long parked) {}
