package dev.idem.internal;

import org.jspecify.annotations.Nullable;

/** Which errors no component may swallow: they end the stream so the application can restart. */
public final class JvmErrors {

  private JvmErrors() {}

  /**
   * Whether {@code error} or one of its causes is a {@link VirtualMachineError} (out of memory,
   * stack overflow) or a {@link LinkageError}.
   *
   * @param error the error
   * @return {@code true} when it must propagate
   */
  public static boolean isFatal(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof VirtualMachineError || t instanceof LinkageError) {
        return true;
      }
    }
    return false;
  }

  /**
   * The first {@link VirtualMachineError} or {@link LinkageError} in the cause chain of {@code error}.
   *
   * @param error the error
   * @return the JVM error, or {@code null} when there is none
   */
  public static @Nullable Error fatalIn(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof VirtualMachineError || t instanceof LinkageError) {
        return (Error) t;
      }
    }
    return null;
  }

  /**
   * A JVM error that travels as an ordinary error signal: Reactor's operators rethrow a JVM error
   * they catch instead of signalling it, but signal this one, and the pipeline unwraps it.
   */
  public static final class Signalled extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * @param error the JVM error it carries
     */
    public Signalled(Error error) {
      super(error.toString(), error, false, false);
    }
  }
}
