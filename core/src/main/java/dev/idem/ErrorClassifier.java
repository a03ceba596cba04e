package dev.idem;

import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.R2dbcNonTransientResourceException;
import io.r2dbc.spi.R2dbcTimeoutException;
import io.r2dbc.spi.R2dbcTransientResourceException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

/**
 * Decides whether an error is the message's fault or the infrastructure's.
 *
 * <p>The {@link #defaults() default classifier} walks the cause chain and answers:
 * <ul>
 *   <li>{@link ErrorKind#INFRASTRUCTURE} for lost or refused database connections
 *       ({@link R2dbcNonTransientResourceException}, {@link R2dbcTransientResourceException}),
 *       timeouts ({@link R2dbcTimeoutException}, {@link TimeoutException}), network I/O errors
 *       ({@link SocketException}, {@link ConnectException}, {@link SocketTimeoutException},
 *       {@link UnknownHostException}, {@link ClosedChannelException}, Netty's I/O errors), and the
 *       PostgreSQL SQLSTATEs of class 08 (connection exception), 53 (insufficient resources),
 *       57014 (statement cancelled, e.g. by {@code statement_timeout}), 57P01..57P03 (server shutting
 *       down or starting), and 25006 (a write on a read-only server: the connection points at a
 *       standby, e.g. a primary demoted by a failover);</li>
 *   <li>{@link ErrorKind#CONTENTION} for the SQLSTATEs 40001 (serialization failure), 40P01
 *       (deadlock) and 55P03 (lock not available, e.g. past {@code lock_timeout});</li>
 *   <li>{@link ErrorKind#NON_RETRYABLE} for {@link NonRetryableException};</li>
 *   <li>{@link ErrorKind#RETRYABLE} for everything else.</li>
 * </ul>
 * Other {@link IOException}s (a JSON library's parse error, say) are not infrastructure: they
 * are retried and then dead-lettered like any handler error. Independently of the classifier,
 * the pipeline treats errors of the transaction itself (acquiring a connection, BEGIN, the dedup
 * insert, COMMIT, the transaction timeout) as infrastructure unless they are classified
 * {@link ErrorKind#NON_RETRYABLE}: they are never the message's fault. In a micro-batch, a
 * handler statement that the server stops on a timeout ({@code 57014}, {@code 55P03}) is the
 * running message's: the batch splits at it instead of retrying as a unit, and the message is then
 * retried alone with the kind above.
 * Compose a custom classifier with {@link #orElse(ErrorClassifier)} to keep these rules.
 */
@FunctionalInterface
public interface ErrorClassifier {

  /**
   * Classifies an error.
   *
   * @param error the error, never {@code null}
   * @return its kind, or {@code null} when this classifier has no opinion
   */
  @Nullable
  ErrorKind classify(Throwable error);

  /**
   * Asks this classifier first and {@code fallback} when it returns {@code null}.
   *
   * @param fallback the classifier to ask next
   * @return the combined classifier
   */
  default ErrorClassifier orElse(ErrorClassifier fallback) {
    return error -> {
      ErrorKind kind = classify(error);
      return kind != null ? kind : fallback.classify(error);
    };
  }

  /**
   * The default rules described in the type's documentation; never returns {@code null}.
   *
   * @return the default classifier
   */
  static ErrorClassifier defaults() {
    return ErrorClassifier::defaultKind;
  }

  private static ErrorKind defaultKind(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof NonRetryableException) {
        return ErrorKind.NON_RETRYABLE;
      }
      if (isContention(t)) {
        return ErrorKind.CONTENTION;
      }
      if (isInfrastructure(t)) {
        return ErrorKind.INFRASTRUCTURE;
      }
    }
    return ErrorKind.RETRYABLE;
  }

  private static boolean isContention(Throwable t) {
    if (t instanceof R2dbcException r2dbc && r2dbc.getSqlState() != null) {
      String state = r2dbc.getSqlState();
      return state.equals("40001") || state.equals("40P01") || state.equals("55P03");
    }
    return false;
  }

  private static boolean isInfrastructure(Throwable t) {
    if (t instanceof R2dbcNonTransientResourceException
        || t instanceof R2dbcTransientResourceException
        || t instanceof R2dbcTimeoutException
        || t instanceof TimeoutException
        || t instanceof SocketException
        || t instanceof SocketTimeoutException
        || t instanceof UnknownHostException
        || t instanceof ClosedChannelException
        || (t instanceof IOException && t.getClass().getName().startsWith("io.netty."))) {
      return true;
    }
    if (t instanceof R2dbcException r2dbc && r2dbc.getSqlState() != null) {
      String state = r2dbc.getSqlState();
      if (state.startsWith("08") || state.startsWith("53") || state.equals("57014") || state.equals("57P01")
          || state.equals("57P02") || state.equals("57P03") || state.equals("25006")) {
        return true;
      }
    }
    // r2dbc-postgresql and r2dbc-pool signal a closed connection or an exhausted pool with
    // plain IllegalStateExceptions in a few places; recognise them by message.
    String message = t.getMessage();
    return t instanceof IllegalStateException && message != null
        && (message.contains("Connection closed") || message.contains("closed connection")
            || message.contains("Cannot exchange messages"));
  }
}
