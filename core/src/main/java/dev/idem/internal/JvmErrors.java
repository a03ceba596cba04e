package dev.idem.internal;

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
}
