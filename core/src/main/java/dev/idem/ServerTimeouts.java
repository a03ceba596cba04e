package dev.idem;

import java.time.Duration;
import java.util.Objects;

/**
 * Server-side guards that PostgreSQL enforces on every transaction of the pipeline, set with
 * {@code SET LOCAL} in the same round trip as {@code BEGIN}, so they cost nothing extra and end
 * with the transaction.
 *
 * <p>They complement the client's {@code transactionTimeout}: a statement or lock wait that runs
 * too long is stopped by the server itself ({@code 57014} or {@code 55P03}), which leaves the
 * connection in a known state, and a session whose client went silent inside a transaction (a
 * stalled network) is ended by the server, which rolls the transaction back and frees its locks.
 *
 * <p>{@link #derivedFrom(Duration)} is the default: statement and lock timeouts at 80% of the
 * transaction timeout (so the server stops a slow statement before the client gives up on the
 * transaction), and the idle-in-transaction timeout equal to the transaction timeout. A zero
 * component leaves that setting at the server's value.
 *
 * @param statementTimeout PostgreSQL {@code statement_timeout}; zero for the server's value
 * @param lockTimeout PostgreSQL {@code lock_timeout}; zero for the server's value
 * @param idleInTransactionTimeout PostgreSQL {@code idle_in_transaction_session_timeout}; zero
 *     for the server's value
 */
public record ServerTimeouts(Duration statementTimeout, Duration lockTimeout, Duration idleInTransactionTimeout) {

  /**
   * Validates the components, naming the one that is wrong.
   *
   * @param statementTimeout PostgreSQL {@code statement_timeout}; zero for the server's value
   * @param lockTimeout PostgreSQL {@code lock_timeout}; zero for the server's value
   * @param idleInTransactionTimeout PostgreSQL {@code idle_in_transaction_session_timeout}; zero
   *     for the server's value
   */
  public ServerTimeouts {
    requireNotNegative(statementTimeout, "statementTimeout");
    requireNotNegative(lockTimeout, "lockTimeout");
    requireNotNegative(idleInTransactionTimeout, "idleInTransactionTimeout");
  }

  /**
   * No guards: every setting keeps the server's (or the role's) value.
   *
   * @return the empty guards
   */
  public static ServerTimeouts none() {
    return new ServerTimeouts(Duration.ZERO, Duration.ZERO, Duration.ZERO);
  }

  /**
   * The defaults for a transaction timeout, as described on the type.
   *
   * @param transactionTimeout the pipeline's transaction timeout, positive
   * @return the guards
   */
  public static ServerTimeouts derivedFrom(Duration transactionTimeout) {
    Objects.requireNonNull(transactionTimeout, "transactionTimeout");
    Duration statements = Duration.ofMillis(Math.max(1, transactionTimeout.toMillis() * 4 / 5));
    return new ServerTimeouts(statements, statements, transactionTimeout);
  }

  /**
   * The statements that apply these guards inside a transaction, for example
   * {@code SET LOCAL statement_timeout = 4800}; empty when every component is zero.
   *
   * @return the SQL, each statement followed by a semicolon
   */
  public String setLocalSql() {
    return setting("statement_timeout", statementTimeout)
        + setting("lock_timeout", lockTimeout)
        + setting("idle_in_transaction_session_timeout", idleInTransactionTimeout);
  }

  private static String setting(String name, Duration value) {
    return value.isZero() ? "" : "SET LOCAL " + name + " = " + Math.max(1, value.toMillis()) + ";";
  }

  private static void requireNotNegative(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative()) {
      throw new IllegalArgumentException(name + " must not be negative, was " + d);
    }
  }
}
