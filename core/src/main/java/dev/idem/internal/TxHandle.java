package dev.idem.internal;

import dev.idem.MessageMetadata;
import dev.idem.Tx;
import io.r2dbc.spi.Connection;
import org.jspecify.annotations.Nullable;

/**
 * The {@link Tx} given to handlers: a connection in a transaction plus the message's identity and
 * metadata.
 *
 * @param connection the connection in a transaction
 * @param messageId the message id
 * @param consumer the consumer name
 * @param metadata the message's metadata, or {@code null} when unknown ({@link #metadata()} then throws)
 */
public record TxHandle(Connection connection, String messageId, String consumer,
    @Nullable MessageMetadata metadata) implements Tx {

  /**
   * A handle without metadata.
   *
   * @param connection the connection in a transaction
   * @param messageId the message id
   * @param consumer the consumer name
   */
  public TxHandle(Connection connection, String messageId, String consumer) {
    this(connection, messageId, consumer, null);
  }

  @Override
  public MessageMetadata metadata() {
    if (metadata == null) {
      return Tx.super.metadata();
    }
    return metadata;
  }
}
