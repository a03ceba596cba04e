package dev.idem;

import dev.idem.internal.DriverBoundary;
import dev.idem.outbox.OutboxRecord;
import dev.idem.outbox.PostgresOutbox;
import io.r2dbc.spi.Connection;
import reactor.core.publisher.Mono;

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
   * Writes an outbox row in this transaction: it commits with the dedup row and the business
   * change, or not at all. A duplicate delivery does not run the handler, so it writes no row.
   * After commit an {@link dev.idem.outbox.OutboxRelay} sends it with its stable message id.
   *
   * @param outbox the outbox table
   * @param record the message
   * @return the row's message id, once the row is written
   */
  default Mono<String> outbox(PostgresOutbox outbox, OutboxRecord record) {
    return DriverBoundary.guard(outbox.add(connection(), record));
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
   * What the broker said about the message being processed: headers, key, partition, timestamp,
   * delivery attempt and broker coordinates. In batch mode each message's {@link Handler} sees its
   * own message's metadata; a {@link BatchHandler} reads it from {@link BatchItem#metadata()}.
   *
   * @return the message's metadata
   * @throws UnsupportedOperationException by default, for {@code Tx} implementations that do not
   *     know the message (the pipeline's own handles all do, except a batch handler's)
   */
  default MessageMetadata metadata() {
    throw new UnsupportedOperationException(getClass().getName() + " does not carry message metadata; "
        + "the transaction handles the pipeline passes to a Handler do");
  }

  /**
   * The consumer name.
   *
   * @return the consumer name
   */
  String consumer();
}
