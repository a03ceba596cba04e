package dev.idem.test;

import io.r2dbc.spi.Connection;
import org.reactivestreams.Publisher;

/**
 * Reads the business state a handler changes, so that {@link HandlerContract} can compare it after
 * each schedule with the clean run's. The values it emits are collected into a list and compared
 * with {@code equals}: emit plain values (numbers, strings, records, maps), in a stable order
 * ({@code ORDER BY}), and leave out what changes from run to run (timestamps, generated ids).
 * {@link HandlerContract.Builder#probe(String)} turns a query into a probe.
 */
@FunctionalInterface
public interface EffectProbe {

  /**
   * Reads the state.
   *
   * @param connection a connection outside any handler transaction, in autocommit
   * @return the values that describe the state
   */
  Publisher<?> read(Connection connection);
}
