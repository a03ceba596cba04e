package dev.idem.spring.internal;

import io.r2dbc.spi.Connection;
import org.jspecify.annotations.Nullable;

/**
 * What is known about one transaction of the {@code SpringTransactionRunner}, shared with
 * {@link IdemTransactionManager} through the Reactor context: its connection, whether its state is
 * known to be clean, whether it committed, whether it was cancelled, and the work's own error.
 */
public final class TransactionAttempt {
  private volatile @Nullable Connection connection;
  /** False from BEGIN until a COMMIT or ROLLBACK completed. */
  private volatile boolean clean = true;
  private volatile boolean committed;
  /** Set when COMMIT is sent: from then on no cancel request is sent (see {@link IdemTransactionManager}). */
  private volatile boolean committing;
  private volatile boolean cancelled;
  private volatile @Nullable Throwable workError;

  /** Creates the state of a transaction that has not begun. */
  public TransactionAttempt() {}

  void begun(Connection connection) {
    this.connection = connection;
    this.clean = false;
  }

  void committing() {
    this.committing = true;
  }

  boolean isCommitting() {
    return committing;
  }

  void committedCleanly() {
    this.committed = true;
    this.clean = true;
  }

  void rolledBack() {
    this.clean = true;
  }

  @Nullable
  Connection connection() {
    return connection;
  }

  boolean isClean() {
    return clean;
  }

  boolean isCancelled() {
    return cancelled;
  }

  /**
   * Whether COMMIT completed.
   *
   * @return whether the transaction committed
   */
  public boolean committed() {
    return committed;
  }

  /** The subscriber cancelled the transaction (the pipeline's timeout, or shutdown). */
  public void cancelled() {
    this.cancelled = true;
  }

  /**
   * Records the work's error, the first one only.
   *
   * @param error the error
   */
  public void workFailed(Throwable error) {
    if (workError == null) {
      workError = error;
    }
  }

  /**
   * The work's error.
   *
   * @return the error, or {@code null} when the work did not fail
   */
  public @Nullable Throwable workError() {
    return workError;
  }
}
