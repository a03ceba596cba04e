package dev.idem;

import io.r2dbc.spi.Connection;
import java.util.function.Function;
import reactor.core.publisher.Mono;

/**
 * Runs work inside one database transaction. The pipeline's only way to the database, kept small
 * so that frameworks can supply their own (for example Spring's {@code TransactionalOperator}
 * with a {@code ConnectionFactoryUtils}-bound connection).
 *
 * <p>Contract: the returned {@link Mono} emits the work's value only after the transaction
 * committed; if the work fails, the transaction is rolled back and the error propagates; if the
 * subscription is cancelled, the transaction is rolled back (or abandoned with its connection,
 * which PostgreSQL rolls back).
 *
 * <p>{@link #inTransaction} is generic, so a lambda cannot implement this interface; implement it
 * with a class.
 */
public interface TransactionRunner {

  /**
   * Runs {@code work} in a new transaction.
   *
   * @param work receives the connection in the transaction and returns the result
   * @param <R> the result type
   * @return the result, emitted after commit
   */
  <R> Mono<R> inTransaction(Function<Connection, Mono<R>> work);
}
