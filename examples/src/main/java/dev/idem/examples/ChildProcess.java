package dev.idem.examples;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;

/**
 * A JVM started from this JVM's class path, so examples can crash a real consumer process with
 * SIGKILL and start it again. Standard output is handed line by line to a listener; standard
 * error goes to a log file.
 */
public final class ChildProcess implements AutoCloseable {

  private final Process process;

  private ChildProcess(Process process) {
    this.process = process;
  }

  /**
   * Starts {@code mainClass} with {@code args}.
   *
   * @param mainClass the class to run
   * @param log where the child's standard error goes
   * @param onLine receives each line of standard output
   * @param args the arguments
   * @return the running child
   */
  public static ChildProcess start(Class<?> mainClass, Path log, Consumer<String> onLine, String... args) {
    List<String> command = new ArrayList<>();
    command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx512m");
    command.add("-cp");
    command.add(classPath());
    command.add(mainClass.getName());
    command.addAll(List.of(args));
    try {
      Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
      Thread reader = new Thread(() -> {
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
          String line;
          while ((line = lines.readLine()) != null) {
            onLine.accept(line);
          }
        } catch (IOException e) {
          // the child died; that is what crash demos do
        }
      }, "child-" + mainClass.getSimpleName());
      reader.setDaemon(true);
      reader.start();
      return new ChildProcess(process);
    } catch (IOException e) {
      throw new UncheckedIOException("Could not start " + mainClass.getName(), e);
    }
  }

  /** Kills the child at once with SIGKILL, as a crash would, and waits until it is gone. */
  public void kill() {
    process.destroyForcibly();
    waitFor();
  }

  /**
   * The child's process id.
   *
   * @return the pid
   */
  public long pid() {
    return process.pid();
  }

  /**
   * The child's thread dump ({@code jcmd <pid> Thread.print}), for a report on a child that
   * stopped making progress.
   *
   * @return the dump, or why there is none
   */
  public String threadDump() {
    Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
    try {
      Process dump = new ProcessBuilder(jcmd.toString(), Long.toString(process.pid()), "Thread.print")
          .redirectErrorStream(true).start();
      String text = new String(dump.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      dump.waitFor();
      return text;
    } catch (IOException e) {
      return "no thread dump (" + jcmd + "): " + e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "no thread dump: interrupted";
    }
  }

  /**
   * Whether the child is still running.
   *
   * @return {@code true} while it runs
   */
  public boolean isAlive() {
    return process.isAlive();
  }

  private void waitFor() {
    try {
      process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      process.destroy();
      waitFor();
    }
  }

  /** This JVM's class path, including what Maven's exec:java put on a class loader. */
  private static String classPath() {
    Set<String> entries = new LinkedHashSet<>();
    for (ClassLoader loader = Thread.currentThread().getContextClassLoader(); loader != null; loader = loader.getParent()) {
      if (loader instanceof URLClassLoader urls) {
        for (URL url : urls.getURLs()) {
          try {
            entries.add(Paths.get(url.toURI()).toString());
          } catch (URISyntaxException | IllegalArgumentException e) {
            // not a file; skip
          }
        }
      }
    }
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (!entry.isBlank()) {
        entries.add(entry);
      }
    }
    return String.join(File.pathSeparator, entries);
  }
}
