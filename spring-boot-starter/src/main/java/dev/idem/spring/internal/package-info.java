/**
 * Implementation of the Spring Boot starter (configured consumers, sources and decoders from
 * properties, the transaction manager under the runner, the health bookkeeping); nothing here is
 * API.
 */
@NullMarked
package dev.idem.spring.internal;

import org.jspecify.annotations.NullMarked;
