package dev.idem.internal;

import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.R2dbcNonTransientResourceException;

/**
 * Tells whether an error says that a connection can no longer run a transaction, so that it must
 * be closed rather than handed back to its pool: after a primary switch a pooled connection either
 * points at a server that is going away or at the demoted primary, now a read-only standby, where
 * every later transaction would fail the same way.
 *
 * <p>Unusable: the SQLSTATEs 25006 (read-only transaction: the server is a standby now), 57P01..57P03
 * (the server is shutting down, crashed or is starting) and class 08 (connection exception), a
 * lost connection as the driver reports it ({@link R2dbcNonTransientResourceException}, its
 * "closed connection" states), anywhere in the cause chain. Plain I/O errors are not enough: a
 * handler's own HTTP call raises them too, and its connection is fine; a connection that did break
 * fails its rollback and is closed for that.
 */
public final class ConnectionFaults {

  private ConnectionFaults() {}

  /**
   * Whether {@code error} leaves its connection unusable.
   *
   * @param error the error that ended a transaction
   * @return {@code true} when the connection must be closed, not reused
   */
  public static boolean unusable(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof R2dbcException r2dbc && r2dbc.getSqlState() != null) {
        String state = r2dbc.getSqlState();
        if (state.equals("25006") || state.equals("57P01") || state.equals("57P02") || state.equals("57P03")
            || state.startsWith("08")) {
          return true;
        }
      }
      if (t instanceof R2dbcNonTransientResourceException) {
        return true;
      }
      String message = t.getMessage();
      if (t instanceof IllegalStateException && message != null
          && (message.contains("Connection closed") || message.contains("closed connection")
              || message.contains("Cannot exchange messages"))) {
        return true;
      }
    }
    return false;
  }
}
