package dev.idem.failover;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactory;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.awaitility.Awaitility;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A real pg_auto_failover formation for the tests: a monitor and three PostgreSQL nodes (a primary
 * and two standbys) on free local ports, with {@code number_sync_standbys = 1}
 * ({@code synchronous_standby_names = 'ANY 1 (...)'} over both standbys), its data in a temporary
 * directory. Started once per JVM by {@link #get()}, shared by the tests, and killed and deleted
 * when the JVM exits.
 *
 * <p>Why three nodes: pg_auto_failover up to 2.2 (Debian ships 2.0) has a race in its monitor
 * (hapostgres/pg_auto_failover#774, fixed on its main branch by #1165 after 2.2): in a planned
 * switch ({@code pg_autoctl perform failover}) the failover candidate leaving the
 * {@code secondary} state can make the monitor reassign the old primary {@code wait_primary}
 * ("none of the standby nodes in the quorum are healthy"). With {@code number_sync_standbys = 0},
 * the default and the only value two nodes allow, {@code wait_primary} turns synchronous
 * replication off: the old primary kept accepting and confirming writes for the whole demote
 * timeout (30 s) while the candidate was promoted, and pg_rewind discarded them when it rejoined.
 * Seen here in 2 of 6 runs of the planned switch tests (up to 1,626 acknowledged payments gone).
 * With two standbys and {@code number_sync_standbys = 1} the same rule keeps the primary's
 * synchronous replication on: its writes wait instead of being confirmed (docs/operating.md).
 *
 * <p>It needs {@code pg_autoctl} and the PostgreSQL binaries it was built for (Debian:
 * {@code apt-get install postgresql-15-auto-failover}, which {@code .ci/run} does); the
 * environment variable {@value #PG_AUTOCTL_ENV} may name another {@code pg_autoctl}. Without them
 * {@link #get()} throws an {@link IllegalStateException} that says how to provide them: the tests
 * fail, they never skip. PostgreSQL refuses to run as root: as root, every command runs as the
 * {@code postgres} user ({@code runuser}).
 *
 * <p>The monitor's health checks are shortened (a node is unhealthy after 5 s instead of 20 s) so
 * that an unplanned switch takes seconds. {@code primary_demote_timeout} keeps its default (30 s).
 */
final class Formation {

  /** Environment variable naming the {@code pg_autoctl} executable. */
  static final String PG_AUTOCTL_ENV = "IDEM_TEST_PG_AUTOCTL";
  static final String DATABASE = "test";
  /** The data nodes; node1 is the first primary. */
  static final List<String> NODES = List.of("node1", "node2", "node3");
  private static final Duration STEP_TIMEOUT = Duration.ofSeconds(120);

  private static volatile Formation instance;

  private final String pgAutoctl;
  private final String binDir;
  private final Path dir;
  private final boolean asPostgres;
  private final int monitorPort;
  private final Map<String, Integer> ports = new ConcurrentHashMap<>();
  /** The keeper processes ({@code pg_autoctl ... run}) by node name; the monitor under "monitor". */
  private final Map<String, Process> keepers = new ConcurrentHashMap<>();

  private Formation(String pgAutoctl, String binDir) throws IOException {
    this.pgAutoctl = pgAutoctl;
    this.binDir = binDir;
    this.asPostgres = "root".equals(System.getProperty("user.name"));
    // The nodes run as the postgres user, who must reach their directory; java.io.tmpdir may be private to root
    // (CI runs with an empty one from mktemp -d, mode 700), so a root run keeps the formation under /tmp.
    this.dir = asPostgres ? Files.createTempDirectory(Path.of("/tmp"), "idem-pgaf-") : Files.createTempDirectory("idem-pgaf-");
    for (String sub : List.of("config", "share", "run")) {
      Files.createDirectories(dir.resolve(sub));
    }
    if (asPostgres) {
      run(List.of("chown", "-R", "postgres", dir.toString()), false);
    }
    this.monitorPort = freePort();
    for (String node : NODES) {
      ports.put(node, freePort());
    }
  }

  /**
   * The shared formation, started on first use (about 15 s).
   *
   * @return the formation with one primary and one synchronous standby
   * @throws IllegalStateException with instructions when pg_auto_failover is not installed
   */
  static Formation get() {
    Formation f = instance;
    if (f == null) {
      synchronized (Formation.class) {
        if (instance == null) {
          instance = start();
        }
        f = instance;
      }
    }
    return f;
  }

  private static Formation start() {
    String pgAutoctl = locatePgAutoctl();
    String binDir = locateBinDir();
    if (pgAutoctl == null || binDir == null) {
      throw new IllegalStateException("No pg_auto_failover for the PostgreSQL failover tests (found pg_autoctl: " + pgAutoctl
          + ", PostgreSQL binaries with the pgautofailover extension: " + binDir + "). Install it: on Debian "
          + "`apt-get install -y postgresql-15-auto-failover` (as .ci/run does), or set " + PG_AUTOCTL_ENV
          + " to a pg_autoctl whose PostgreSQL has the pgautofailover extension (its pg_ctl beside pg_config --bindir).");
    }
    Formation f;
    try {
      f = new Formation(pgAutoctl, binDir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Runtime.getRuntime().addShutdownHook(new Thread(f::destroy, "pg_auto_failover teardown"));
    long started = System.nanoTime();
    f.startMonitor();
    f.createNode("node1");
    f.awaitState("node1", "single", "wait_primary", "primary");
    f.createNode("node2");
    f.createNode("node3");
    f.awaitHealthy();
    System.out.printf("pg_auto_failover formation up in %.1f s: monitor :%d, nodes %s, data in %s%n",
        (System.nanoTime() - started) / 1e9, f.monitorPort, new java.util.TreeMap<>(f.ports), f.dir);
    return f;
  }

  private static String locatePgAutoctl() {
    String env = System.getenv(PG_AUTOCTL_ENV);
    if (env != null && !env.isBlank()) {
      return new File(env).canExecute() ? env : null;
    }
    for (String candidate : List.of("/usr/bin/pg_autoctl", "/usr/local/bin/pg_autoctl")) {
      if (new File(candidate).canExecute()) {
        return candidate;
      }
    }
    return null;
  }

  /** The newest /usr/lib/postgresql/N/bin whose server has the pgautofailover extension. */
  private static String locateBinDir() {
    File root = new File("/usr/lib/postgresql");
    File[] versions = root.listFiles();
    if (versions == null) {
      return null;
    }
    return Stream.of(versions)
        .filter(v -> new File(v, "lib/pgautofailover.so").exists() && new File(v, "bin/pg_ctl").canExecute())
        .max(Comparator.comparingInt(v -> v.getName().matches("\\d+") ? Integer.parseInt(v.getName()) : 0))
        .map(v -> new File(v, "bin").getPath())
        .orElse(null);
  }

  /**
   * The R2DBC URL that follows the primary: every node, {@code targetServerType=primary}.
   *
   * @return the multi-host URL
   */
  String failoverUrl() {
    return failoverUrl("node1");
  }

  /**
   * The multi-host URL with {@code first} listed first: when it is a standby, only
   * {@code targetServerType=primary} keeps the driver off it.
   *
   * @param first one of {@link #NODES}
   * @return the multi-host URL
   */
  String failoverUrl(String first) {
    return "r2dbc:postgresql:failover://postgres@" + Stream.concat(Stream.of(first), NODES.stream().filter(n -> !n.equals(first)))
        .map(n -> "127.0.0.1:" + ports.get(n)).collect(java.util.stream.Collectors.joining(",")) + "/" + DATABASE
        + "?targetServerType=primary";
  }

  /**
   * A node's port.
   *
   * @param node one of {@link #NODES}
   * @return its PostgreSQL port
   */
  int port(String node) {
    return ports.get(node);
  }

  /**
   * The URL of one node.
   *
   * @param node one of {@link #NODES}
   * @return its single-host URL
   */
  String nodeUrl(String node) {
    return "r2dbc:postgresql://postgres@127.0.0.1:" + ports.get(node) + "/" + DATABASE;
  }

  /**
   * The node that answers as a writable primary now (waiting up to 30 s for one).
   *
   * @return one of {@link #NODES}
   */
  String primary() {
    String[] found = new String[1];
    Awaitility.await("a writable primary (" + describe() + ")").atMost(Duration.ofSeconds(30))
        .pollInterval(Duration.ofMillis(200))
        .until(() -> {
          found[0] = NODES.stream().filter(this::writable).findFirst().orElse(null);
          return found[0] != null;
        });
    return found[0];
  }

  /**
   * A node other than {@code node} that answers as a writable primary now, if any.
   *
   * @param node the node to leave out, typically the old primary
   * @return the writable node, or empty
   */
  Optional<String> writableOtherThan(String node) {
    return NODES.stream().filter(n -> !n.equals(node)).filter(this::writable).findFirst();
  }

  /**
   * The nodes other than {@code node}.
   *
   * @param node one of {@link #NODES}
   * @return the others, in {@link #NODES} order
   */
  static List<String> others(String node) {
    return NODES.stream().filter(n -> !n.equals(node)).toList();
  }

  /**
   * A planned switch: {@code pg_autoctl perform failover}, which returns once the standby is primary.
   * The monitor refused it once in CI right after an earlier switch although both nodes reported
   * their goal states (exit code 6, the monitor's); a refusal changes nothing, so while both nodes
   * still hold their states it is asked again, up to three times, 5 s apart, and the command's
   * output is in the error otherwise.
   */
  void performFailover() {
    Map<String, String[]> before = states();
    for (int attempt = 1;; attempt++) {
      try {
        run(autoctl("perform", "failover", "--pgdata", dir.resolve("monitor").toString()), true);
        return;
      } catch (IllegalStateException e) {
        if (attempt == 3 || !sameStates(before, states())) {
          throw e;
        }
        System.out
            .println("pg_autoctl perform failover refused (attempt " + attempt + "), asking again in 5 s: " + e.getMessage());
        Awaitility.await("the pause before asking again").pollDelay(Duration.ofSeconds(5)).atMost(Duration.ofSeconds(10))
            .until(() -> true);
      }
    }
  }

  private static boolean sameStates(Map<String, String[]> a, Map<String, String[]> b) {
    return a.size() == b.size() && a.entrySet().stream().allMatch(e -> b.containsKey(e.getKey())
        && java.util.Arrays.equals(e.getValue(), b.get(e.getKey())));
  }

  /** An unplanned one: SIGKILL of the node's keeper, its postmaster and every process under them. */
  void crash(String node) {
    Process keeper = keepers.remove(node);
    if (keeper == null) {
      throw new IllegalStateException(node + " is not running");
    }
    List<ProcessHandle> tree = new ArrayList<>(keeper.descendants().toList());
    tree.add(keeper.toHandle());
    tree.forEach(ProcessHandle::destroyForcibly);
    for (ProcessHandle p : tree) {
      p.onExit().orTimeout(30, TimeUnit.SECONDS).join();
    }
  }

  /**
   * Takes a standby in or out of the synchronous quorum ({@code pg_autoctl set node replication-quorum}):
   * out of it, the primary replicates to it asynchronously.
   */
  void setReplicationQuorum(String node, boolean quorum) {
    List<String> command = autoctl("set", "node", "replication-quorum", Boolean.toString(quorum), "--pgdata",
        dir.resolve(node).toString());
    long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
    Duration pause = Duration.ZERO;
    while (true) {
      // The monitor refuses a change while the formation still applies the last one (pg_autoctl exits 6 with the
      // primary in apply_settings, seen in CI): each attempt starts from a settled formation.
      awaitSettled(pause);
      try {
        run(command, true);
        return;
      } catch (IllegalStateException e) {
        if (System.nanoTime() - deadline > 0) {
          throw e;
        }
        System.out.println("retrying once the formation has settled: " + e.getMessage());
        pause = Duration.ofSeconds(1);
      }
    }
  }

  /** Waits (after {@code pause}) until one node is primary, the others secondary, each in the state the monitor assigned. */
  private void awaitSettled(Duration pause) {
    Awaitility.await("every node in its assigned state").pollDelay(pause).atMost(STEP_TIMEOUT.plus(pause))
        .pollInterval(Duration.ofMillis(200)).until(() -> settled(states()));
  }

  /** One node primary, the others secondary, each in the state the monitor assigned. */
  private static boolean settled(Map<String, String[]> s) {
    return s.size() == NODES.size() && s.values().stream().allMatch(v -> v[0].equals(v[1]))
        && s.values().stream().filter(v -> v[0].equals("primary")).count() == 1
        && s.values().stream().filter(v -> v[0].equals("secondary")).count() == NODES.size() - 1;
  }

  /**
   * How many standbys must confirm each commit ({@code number_sync_standbys} of the formation);
   * the monitor refuses 1 unless two standbys are in the replication quorum.
   *
   * @param count 0 or 1
   */
  void setNumberSyncStandbys(int count) {
    query(monitorUrl(), "SELECT pgautofailover.set_formation_number_sync_standbys('default', " + count + ")::text");
  }

  /**
   * Stops ({@code SIGSTOP}) or resumes ({@code SIGCONT}) the WAL receiver of every standby: while
   * they are stopped no standby confirms a commit, so the primary's COMMITs wait for synchronous
   * replication, as they do when the standbys are slow or unreachable.
   *
   * @param paused true to stop them, false to resume them
   */
  void pauseWalReceivers(boolean paused) {
    for (String standby : others(primary())) {
      String pid = query(nodeUrl(standby), "SELECT pid::text FROM pg_stat_wal_receiver");
      if (pid == null) {
        throw new IllegalStateException(standby + " has no WAL receiver (" + describe() + ")");
      }
      run(List.of("kill", paused ? "-STOP" : "-CONT", pid), false);
    }
  }

  /** Starts a stopped node's keeper again: it rejoins as a standby (pg_rewind when needed). */
  void restart(String node) {
    keepers.put(node, spawn(node + "-run", autoctl("run", "--pgdata", dir.resolve(node).toString())));
  }

  /**
   * Waits for one primary and two secondaries, with synchronous replication on and
   * {@code number_sync_standbys = 1}, as the monitor and the primary say; a node whose keeper a
   * failed test left stopped is started again first, and {@code number_sync_standbys} is set
   * back to 1 once the group is settled.
   */
  void awaitHealthy() {
    for (String node : NODES) {
      if (!keepers.containsKey(node)) {
        restart(node);
      }
    }
    Awaitility.await("a primary and a synchronous secondary").atMost(STEP_TIMEOUT).pollInterval(Duration.ofMillis(500))
        .until(() -> {
          Map<String, String[]> s = states();
          if (!settled(s)) {
            checkpointWhereStandbyWaits(s);
            return false;
          }
          // And the monitor's health checks reach every node (pg_autoctl show state's "Reachable").
          if (!"true".equals(query(monitorUrl(), "SELECT bool_and(health = 1)::text FROM pgautofailover.node"))) {
            return false;
          }
          if (!"1".equals(query(monitorUrl(),
              "SELECT number_sync_standbys::text FROM pgautofailover.formation WHERE formationid = 'default'"))) {
            setNumberSyncStandbys(1);
            return false;
          }
          return !query(nodeUrl(primary()), "SELECT current_setting('synchronous_standby_names')").isBlank();
        });
  }

  /** Whether a node answers as a writable primary. */
  boolean writable(String node) {
    try {
      return "false".equals(query(nodeUrl(node), "SELECT pg_is_in_recovery()::text"));
    } catch (RuntimeException e) {
      return false;
    }
  }

  /** pg_basebackup waits for a spread checkpoint (minutes) unless the primary runs one. */
  private void checkpointWhereStandbyWaits(Map<String, String[]> s) {
    boolean cloning = s.values().stream().anyMatch(v -> v[0].equals("wait_standby") || v[0].equals("catchingup")
        || v[1].equals("catchingup"));
    if (cloning) {
      s.entrySet().stream().filter(e -> e.getValue()[0].equals("wait_primary") || e.getValue()[0].equals("primary")).findFirst()
          .ifPresent(e -> {
            try {
              query(nodeUrl(e.getKey()), "CHECKPOINT");
            } catch (RuntimeException ignored) {
              // the node may be restarting; the next poll checkpoints again
            }
          });
    }
  }

  private void awaitState(String node, String... reported) {
    List<String> wanted = List.of(reported);
    Awaitility.await(node + " in " + wanted).atMost(STEP_TIMEOUT).pollInterval(Duration.ofMillis(300))
        .until(() -> Optional.ofNullable(states().get(node)).map(v -> wanted.contains(v[0])).orElse(false));
  }

  /** Node name to {reported state, goal state}, from the monitor. */
  Map<String, String[]> states() {
    String rows = query(monitorUrl(),
        "SELECT string_agg(nodename || ':' || reportedstate || ':' || goalstate, ',') FROM pgautofailover.node");
    Map<String, String[]> states = new java.util.TreeMap<>();
    if (rows != null) {
      for (String row : rows.split(",")) {
        String[] parts = row.split(":");
        states.put(parts[0], new String[]{parts[1], parts[2]});
      }
    }
    return states;
  }

  /**
   * The monitor's event id now, for {@link #eventsSince(long)}.
   *
   * @return the largest event id, 0 when there is none
   */
  long lastEventId() {
    return Long.parseLong(query(monitorUrl(), "SELECT coalesce(max(eventid), 0)::text FROM pgautofailover.event"));
  }

  /**
   * The monitor's events after {@code eventId}, one per line: time, node, reported and goal state,
   * the node's timeline and LSN, and the monitor's description. What a failed switch check needs.
   *
   * @param eventId from {@link #lastEventId()}
   * @return the events, oldest first
   */
  String eventsSince(long eventId) {
    try {
      return query(monitorUrl(),
          "SELECT string_agg(to_char(eventtime, 'HH24:MI:SS.MS') || ' ' || nodename || ' ' || reportedstate"
              + " || '/' || goalstate || ' tli ' || reportedtli || ' lsn ' || reportedlsn || ': ' || description, E'\\n' ORDER BY eventid)"
              + " FROM pgautofailover.event WHERE eventid > " + eventId);
    } catch (RuntimeException e) {
      return "(monitor unreachable: " + e + ")";
    }
  }

  String describe() {
    StringBuilder b = new StringBuilder();
    try {
      states().forEach((node, v) -> b.append(node).append(' ').append(v[0]).append('/').append(v[1]).append("; "));
    } catch (RuntimeException e) {
      b.append("monitor unreachable: ").append(e);
    }
    return b.toString();
  }

  private String monitorUrl() {
    return "r2dbc:postgresql://postgres@127.0.0.1:" + monitorPort + "/pg_auto_failover";
  }

  private void startMonitor() {
    keepers.put("monitor", spawn("monitor", autoctl("create", "monitor", "--pgdata", dir.resolve("monitor").toString(),
        "--pgport", Integer.toString(monitorPort), "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust",
        "--no-ssl", "--run")));
    Awaitility.await("the pg_auto_failover monitor").atMost(STEP_TIMEOUT).pollInterval(Duration.ofMillis(300))
        .ignoreExceptions().until(() -> query(monitorUrl(), "SELECT count(*)::text FROM pgautofailover.node") != null);
    for (String setting : List.of("health_check_period = 1000", "health_check_timeout = 1000", "health_check_retry_delay = 500",
        "health_check_max_retries = 1", "node_considered_unhealthy_timeout = 5000", "startup_grace_period = 2000")) {
      query(monitorUrl(), "ALTER SYSTEM SET pgautofailover." + setting);
    }
    query(monitorUrl(), "SELECT pg_reload_conf()::text");
  }

  private void createNode(String node) {
    keepers.put(node, spawn(node, autoctl("create", "postgres", "--pgdata", dir.resolve(node).toString(),
        "--pgport", Integer.toString(ports.get(node)), "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust",
        "--no-ssl", "--dbname", DATABASE, "--name", node,
        "--monitor", "postgres://autoctl_node@127.0.0.1:" + monitorPort + "/pg_auto_failover?sslmode=disable", "--run")));
  }

  /** pg_autoctl with the formation's environment, as the postgres user when this JVM is root. */
  private List<String> autoctl(String... args) {
    List<String> command = new ArrayList<>();
    if (asPostgres) {
      command.addAll(List.of("runuser", "-u", "postgres", "--"));
    }
    command.addAll(List.of("env", "PATH=" + binDir + ":/usr/bin:/bin", "XDG_CONFIG_HOME=" + dir.resolve("config"),
        "XDG_DATA_HOME=" + dir.resolve("share"), "XDG_RUNTIME_DIR=" + dir.resolve("run"), "PGHOST=127.0.0.1"));
    command.add(pgAutoctl);
    command.addAll(List.of(args));
    return command;
  }

  private Process spawn(String name, List<String> command) {
    try {
      return new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(name + ".log").toFile())).start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void run(List<String> command, boolean log) {
    try {
      Process p = new ProcessBuilder(command).directory(dir == null ? null : dir.toFile()).redirectErrorStream(true)
          .redirectOutput(
              log ? ProcessBuilder.Redirect.appendTo(dir.resolve("commands.log").toFile()) : ProcessBuilder.Redirect.DISCARD)
          .start();
      if (!p.waitFor(STEP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new IllegalStateException("timed out: " + command + " (" + describe() + ")");
      }
      if (p.exitValue() != 0) {
        throw new IllegalStateException("failed with exit code " + p.exitValue() + ": " + command + " (" + describe() + ")"
            + (log ? "; the end of " + dir.resolve("commands.log") + ":\n" + tail(dir.resolve("commands.log"), 12) : ""));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static String tail(Path file, int lines) {
    try {
      // pg_autoctl's output is not always UTF-8; a malformed byte becomes U+FFFD rather than hiding the lines.
      List<String> all = new String(Files.readAllBytes(file), StandardCharsets.UTF_8).lines().toList();
      return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
    } catch (IOException | RuntimeException e) {
      return "(unreadable: " + e + ")";
    }
  }

  /** The first column of the first row, as text ({@code null} when there is none); blocking, on a fresh connection. */
  static String query(String url, String sql) {
    ConnectionFactory factory = ConnectionFactories.get(url);
    Optional<String> value = Mono.usingWhen(Mono.from(factory.create()),
        (Connection c) -> Flux.from(c.createStatement(sql).execute())
            .concatMap(r -> r.map((row, meta) -> Optional.ofNullable(row.get(0)).map(String::valueOf)))
            .next(),
        Connection::close)
        .block(Duration.ofSeconds(10));
    return value == null ? null : value.orElse(null);
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  private void destroy() {
    for (Process keeper : keepers.values()) {
      keeper.descendants().forEach(ProcessHandle::destroyForcibly);
      keeper.destroyForcibly();
    }
    for (Process keeper : keepers.values()) {
      keeper.onExit().orTimeout(10, TimeUnit.SECONDS).exceptionally(e -> null).join();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      System.err.println("could not delete " + dir + ": " + e);
    }
  }
}
