package dev.idem.pipeline;

import java.util.Objects;

/**
 * The markers a failure carries through the pipeline so that its origin is told apart (see
 * {@link FailureKinds}): the handler's own error, a COMMIT the database refused after the
 * handler ran, a batch's timeout struck while an effect ran, and the order to split a batch.
 * They never leave the pipeline: settlement and the stream see the error they wrap.
 */
final class PipelineFailures {

  private PipelineFailures() {}

  /**
   * Marks an error at COMMIT, after the handler succeeded, that says the database would not
   * commit the handler's writes: the message's failure, not the infrastructure's.
   */
  static final class CommitRejected extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CommitRejected(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }

    /** COMMIT answered ROLLBACK, or a data, integrity, transaction-state or rollback SQLSTATE. */
    static boolean matches(Throwable error) {
      if (error instanceof io.r2dbc.spi.R2dbcRollbackException) {
        return true;
      }
      String state = error instanceof io.r2dbc.spi.R2dbcException r2dbc ? r2dbc.getSqlState() : null;
      return state != null
          && (state.startsWith("22") || state.startsWith("23") || state.startsWith("25") || state.startsWith("40"));
    }
  }

  /** Tells a batch to split, at {@link #index} when known. */
  static final class BatchSplit extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int index;

    BatchSplit(Throwable cause) {
      super(cause.toString(), cause, false, false);
      this.index = cause instanceof HandlerFailure failure
          ? failure.index
          : cause instanceof EffectTimeout timeout
              ? timeout.index
              : cause instanceof SlowEffect slow ? slow.index : -1;
    }

    /** What the isolated message's own retries start from: a timeout as such, as in per-message mode. */
    Throwable failure() {
      return Objects.requireNonNull(getCause() instanceof EffectTimeout timeout ? timeout.getCause() : getCause());
    }
  }

  /**
   * The {@code transactionTimeout} of a batch, struck while the effect of the message at
   * {@link #index} ran ({@link #UNKNOWN} while a batch handler ran for several): the batch splits
   * around it like around a failing message, and that message is then retried on its own, where a
   * timeout is infrastructure as in per-message mode.
   */
  static final class EffectTimeout extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** No effect was running: the timeout struck in BEGIN, the dedup insert or COMMIT. */
    static final int NOT_IN_EFFECTS = -2;
    /** A batch handler ran for several messages. */
    static final int UNKNOWN = -1;
    final int index;

    EffectTimeout(Throwable timeout, int index) {
      super(timeout.toString(), timeout, false, false);
      this.index = index;
    }
  }

  /**
   * The handler of the message at {@link #index} ran longer than the {@code slowMessageThreshold}
   * inside a micro-batch: the attempt was cancelled (rolled back), and the batch splits around that
   * message, which is detached: it continues on its own, off its lane, at once and without counting
   * a failure. Not an error of anyone's.
   */
  static final class SlowEffect extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int index;
    final java.time.Duration ran;

    SlowEffect(int index, java.time.Duration ran) {
      super("a handler ran for " + ran.toMillis() + " ms inside a micro-batch", null, false, false);
      this.index = index;
      this.ran = ran;
    }
  }

  /** Marks an error as the handler's, so that it is told apart from errors of the transaction. */
  static final class HandlerFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The failing message's index in its batch, or -1 when unknown or not batched. */
    final int index;

    HandlerFailure(Throwable cause, int index) {
      super(cause.toString(), cause, false, false);
      this.index = index;
    }
  }
}
