package dev.idem.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The CPU time of another process on this machine (the broker's), from Linux's
 * {@code /proc/<pid>/stat}: user plus system time, in clock ticks of 10 ms. Unreadable (another
 * system, a broker elsewhere, pid -1) gives -1, and the table leaves the figure out.
 */
final class ProcessCpu {

  private static final long NANOS_PER_TICK = 10_000_000L;

  private ProcessCpu() {}

  /** CPU nanoseconds the process has used so far, or -1. */
  static long nanos(long pid) {
    if (pid <= 0) {
      return -1;
    }
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      // The command name, in parentheses, may hold spaces: the fields that count come after its ')'.
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      long user = Long.parseLong(fields[11]);
      long system = Long.parseLong(fields[12]);
      return (user + system) * NANOS_PER_TICK;
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /** The pid of the local process whose command ends with {@code command} (e.g. RabbitMQ's {@code beam.smp}), or -1. */
  static long find(String command) {
    return ProcessHandle.allProcesses()
        .filter(p -> p.info().command().map(c -> c.endsWith("/" + command) || c.equals(command)).orElse(false))
        .mapToLong(ProcessHandle::pid).findFirst().orElse(-1);
  }
}
