package dev.idem.failover;

import java.time.LocalTime;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.stream.Collectors;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

/**
 * What the nodes of a {@link Formation} looked like from the test while a workload ran: every
 * 200 ms, which nodes answered as writable primaries and the monitor's reported/goal states,
 * recorded only when that changed. A failed switch check prints it, so that two writable nodes at
 * once, or a switch back, show in the report.
 */
final class Timeline implements AutoCloseable {

  private final ConcurrentLinkedQueue<String> changes = new ConcurrentLinkedQueue<>();
  private final Disposable poller;
  private volatile String last = "";

  Timeline(Formation formation) {
    poller = Flux.interval(java.time.Duration.ofMillis(200)).onBackpressureDrop()
        .publishOn(Schedulers.boundedElastic(), 1)
        .subscribe(tick -> record(formation));
  }

  private void record(Formation formation) {
    String writable = Formation.NODES.stream().filter(formation::writable).collect(Collectors.joining(","));
    String now = "writable [" + writable + "] " + formation.describe();
    if (!now.equals(last)) {
      last = now;
      changes.add(LocalTime.now().truncatedTo(ChronoUnit.MILLIS) + " " + now);
    }
  }

  @Override
  public String toString() {
    return String.join("\n", changes);
  }

  @Override
  public void close() {
    poller.dispose();
  }
}
