package dev.idem;

import io.r2dbc.spi.Connection;

/**
 * The message's transaction as the handler sees it: SQL runs on the same connection, inside the
 * same transaction as the dedup row.
 *
 * <p>The handle is valid only while the handler's publisher runs. It must not begin, commit or
 * roll back the transaction; the pipeline does.
 */
public interface Tx {

  /**
   * Prepares a statement on the transaction's connection. Use PostgreSQL placeholders
   * ({@code $1}, {@code $2}, ...) and bind values by zero-based index.
   *
   * @param sql the statement text
   * @return a fluent statement
   */
  default Sql sql(String sql) {
    return new Sql(connection().createStatement(sql));
  }

  /**
   * The raw R2DBC connection, for libraries that need it. Do not close it or change its
   * transaction state.
   *
   * @return the connection in a transaction
   */
  Connection connection();

  /**
   * The id of the message being processed; a stable idempotency key for outbox rows.
   *
   * @return the message id
   */
  String messageId();

  /**
   * The consumer name.
   *
   * @return the consumer name
   */
  String consumer();
}
