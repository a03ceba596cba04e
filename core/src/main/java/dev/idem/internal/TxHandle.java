package dev.idem.internal;

import dev.idem.Tx;
import io.r2dbc.spi.Connection;

/**
 * The {@link Tx} given to handlers: a connection in a transaction plus the message's identity.
 *
 * @param connection the connection in a transaction
 * @param messageId the message id
 * @param consumer the consumer name
 */
public record TxHandle(Connection connection, String messageId, String consumer) implements Tx {}
