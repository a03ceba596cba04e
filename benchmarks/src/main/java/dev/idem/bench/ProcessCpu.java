package dev.idem.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The CPU time of another process on this machine (the broker's, the database's), from Linux's
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
    long[] times = times(pid);
    return times.length == 0 ? -1 : (times[0] + times[1]) * NANOS_PER_TICK;
  }

  /**
   * CPU nanoseconds the local PostgreSQL has used so far: every {@code postgres} process's own,
   * plus what the postmaster's exited children (backends of closed connections) used, or -1 when
   * no local PostgreSQL runs.
   */
  static long postgresNanos() {
    long[] total = {0};
    boolean[] found = {false};
    ProcessHandle.allProcesses()
        .filter(p -> p.info().command().map(c -> c.endsWith("/postgres")).orElse(false))
        .forEach(p -> {
          long[] times = times(p.pid());
          if (times.length == 0) {
            return;
          }
          found[0] = true;
          total[0] += times[0] + times[1];
          boolean postmaster = p.parent().flatMap(parent -> parent.info().command()).map(c -> !c.endsWith("/postgres"))
              .orElse(true);
          if (postmaster) {
            total[0] += times[2] + times[3];
          }
        });
    return found[0] ? total[0] * NANOS_PER_TICK : -1;
  }

  /** utime, stime, cutime, cstime in ticks, or an empty array. */
  private static long[] times(long pid) {
    try {
      // The command name, in parentheses, may hold spaces: the fields that count come after its ')'.
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return new long[]{Long.parseLong(fields[11]), Long.parseLong(fields[12]), Long.parseLong(fields[13]),
          Long.parseLong(fields[14])};
    } catch (IOException | RuntimeException e) {
      return new long[0];
    }
  }

  /** The pid of the local process whose command ends with {@code command} (e.g. RabbitMQ's {@code beam.smp}), or -1. */
  static long find(String command) {
    return ProcessHandle.allProcesses()
        .filter(p -> p.info().command().map(c -> c.endsWith("/" + command) || c.equals(command)).orElse(false))
        .mapToLong(ProcessHandle::pid).findFirst().orElse(-1);
  }
}
