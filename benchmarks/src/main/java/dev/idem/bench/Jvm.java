package dev.idem.bench;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** This JVM's CPU time and child JVMs on the benchmark's class path. */
final class Jvm {

  private static final com.sun.management.OperatingSystemMXBean OS = (com.sun.management.OperatingSystemMXBean) ManagementFactory
      .getOperatingSystemMXBean();

  private Jvm() {}

  /** CPU time of this process (all its threads: the consumer, GC, JIT), in nanoseconds. */
  static long cpuNanos() {
    return OS.getProcessCpuTime();
  }

  static double loadAverage() {
    return OS.getSystemLoadAverage();
  }

  /**
   * Starts {@code mainClass} in a new JVM on this benchmark's class path. Under
   * {@code exec:java} the class path is the plugin's class loader, not {@code java.class.path}.
   */
  static ProcessBuilder java(List<String> jvmOptions, Class<?> mainClass, List<String> arguments) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(jvmOptions);
    command.add("-cp");
    command.add(classPath());
    command.add(mainClass.getName());
    command.addAll(arguments);
    return new ProcessBuilder(command);
  }

  static String classPath() {
    ClassLoader loader = Jvm.class.getClassLoader();
    if (loader instanceof URLClassLoader urls && urls.getURLs().length > 0) {
      List<String> entries = new ArrayList<>();
      for (URL url : urls.getURLs()) {
        try {
          entries.add(Path.of(url.toURI()).toString());
        } catch (URISyntaxException | IllegalArgumentException e) {
          throw new IllegalStateException("class path entry is not a file: " + url, e);
        }
      }
      return String.join(File.pathSeparator, entries);
    }
    return System.getProperty("java.class.path");
  }
}
