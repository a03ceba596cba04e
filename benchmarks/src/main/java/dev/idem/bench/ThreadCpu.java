package dev.idem.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * {@code -Dprofile=true}: CPU time per thread group (thread names with their numbers removed)
 * during a row, and how much of it was in the kernel, from {@link ThreadMXBean}, printed to standard error: where the consumer's CPU goes.
 */
final class ThreadCpu {

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  private final Map<Long, Long> start = new HashMap<>();
  private final Map<Long, Long> startUser = new HashMap<>();

  private ThreadCpu() {}

  static ThreadCpu startIfEnabled() {
    if (!Boolean.getBoolean("profile") || !THREADS.isThreadCpuTimeSupported()) {
      return null;
    }
    ThreadCpu snapshot = new ThreadCpu();
    for (long id : THREADS.getAllThreadIds()) {
      snapshot.start.put(id, Math.max(0, THREADS.getThreadCpuTime(id)));
      snapshot.startUser.put(id, Math.max(0, THREADS.getThreadUserTime(id)));
    }
    return snapshot;
  }

  /** Prints the thread groups that used the most CPU since the snapshot (threads that ended in between are missing). */
  void print(String label) {
    Map<String, Long> byGroup = new HashMap<>();
    Map<String, Long> userByGroup = new HashMap<>();
    long[] ids = THREADS.getAllThreadIds();
    ThreadInfo[] infos = THREADS.getThreadInfo(ids);
    for (int i = 0; i < ids.length; i++) {
      long cpu = THREADS.getThreadCpuTime(ids[i]);
      if (infos[i] == null || cpu < 0) {
        continue;
      }
      String group = infos[i].getThreadName().replaceAll("[0-9]+", "#");
      byGroup.merge(group, cpu - start.getOrDefault(ids[i], 0L), Long::sum);
      userByGroup.merge(group, Math.max(0, THREADS.getThreadUserTime(ids[i])) - startUser.getOrDefault(ids[i], 0L), Long::sum);
    }
    String top = byGroup.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed()).limit(8)
        .map(e -> String.format(Locale.ROOT, "%s %.2fs (%.2fs in the kernel)", e.getKey(), e.getValue() / 1e9,
            (e.getValue() - userByGroup.getOrDefault(e.getKey(), 0L)) / 1e9))
        .collect(Collectors.joining(", "));
    System.err.println("  [profile " + label + "] thread CPU: " + top);
  }
}
