/**
 * Testing handlers without a broker: {@link dev.idem.test.HandlerContract} proves a handler
 * exactly-once against the user's PostgreSQL under hostile {@link dev.idem.test.Schedule}s and
 * reports each {@link dev.idem.test.Finding}; {@link dev.idem.test.InMemorySource} and
 * {@link dev.idem.test.InMemoryDelivery} stand in for a broker in handler tests.
 */
@NullMarked
package dev.idem.test;

import org.jspecify.annotations.NullMarked;
