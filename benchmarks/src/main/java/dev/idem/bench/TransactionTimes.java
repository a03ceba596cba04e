package dev.idem.bench;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.concurrent.atomic.LongAdder;

/**
 * What a latency row's consumer spent, beside its latencies: the mean transaction attempt (as
 * {@link ConsumerMetrics#transaction} reports it: per message, with its batch's duration), this
 * process's CPU time per message and the JIT compilers' time while the row ran. Without batching
 * a lane runs one transaction at a time, so {@code concurrency / mean transaction} is the most
 * the lanes can settle per second: a row whose rate is above it falls behind whatever else
 * happens.
 */
final class TransactionTimes implements ConsumerMetrics {

  private static final CompilationMXBean JIT = ManagementFactory.getCompilationMXBean();

  private final LongAdder transactions = new LongAdder();
  private final LongAdder nanos = new LongAdder();
  private long cpuStart;
  private long jitStart;
  private long cpu;
  private long jitMillis;

  @Override
  public void transaction(Delivery<?> delivery, Duration duration, boolean committed) {
    transactions.increment();
    nanos.add(duration.toNanos());
  }

  void start() {
    cpuStart = Jvm.cpuNanos();
    jitStart = JIT.isCompilationTimeMonitoringSupported() ? JIT.getTotalCompilationTime() : 0;
  }

  void stop() {
    cpu = Jvm.cpuNanos() - cpuStart;
    jitMillis = JIT.isCompilationTimeMonitoringSupported() ? JIT.getTotalCompilationTime() - jitStart : -1;
  }

  /** The mean transaction attempt in milliseconds, -1 before any. */
  double meanMillis() {
    long n = transactions.sum();
    return n == 0 ? -1 : nanos.sum() / 1e6 / n;
  }

  /** This process's CPU milliseconds per message of the row. */
  double cpuMillisPerMessage(long messages) {
    return cpu / 1e6 / Math.max(1, messages);
  }

  /** The JIT compilers' time while the row ran, in seconds (their threads' wall time), -1 when unknown. */
  double jitSeconds() {
    return jitMillis < 0 ? -1 : jitMillis / 1e3;
  }
}
