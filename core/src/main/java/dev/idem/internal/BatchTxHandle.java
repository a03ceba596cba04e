package dev.idem.internal;

import dev.idem.MessageMetadata;
import dev.idem.Tx;
import io.r2dbc.spi.Connection;

/**
 * The {@link Tx} given to a batch handler: a connection in the batch's transaction. It has no
 * single message id; each {@link dev.idem.BatchItem} carries its own.
 *
 * @param connection the connection in a transaction
 * @param consumer the consumer name
 */
public record BatchTxHandle(Connection connection, String consumer) implements Tx {

  /**
   * Not available on a batch.
   *
   * @return never
   * @throws IllegalStateException always
   */
  @Override
  public String messageId() {
    throw new IllegalStateException("a batch has no single message id; use BatchItem.messageId() of each message");
  }

  /**
   * Not available on a batch.
   *
   * @return never
   * @throws IllegalStateException always
   */
  @Override
  public MessageMetadata metadata() {
    throw new IllegalStateException("a batch has no single message's metadata; use BatchItem.metadata() of each message");
  }
}
