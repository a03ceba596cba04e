/**
 * Implementation of idem-test (the contract's runner, its schedules and the instrumented handler
 * and transaction); nothing here is API.
 */
@NullMarked
package dev.idem.test.internal;

import org.jspecify.annotations.NullMarked;
