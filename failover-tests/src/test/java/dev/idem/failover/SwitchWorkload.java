package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.BatchHandler;
import dev.idem.BatchItem;
import dev.idem.DeadLetterReason;
import dev.idem.Handler;
import dev.idem.IdempotentConsumer;
import dev.idem.NonRetryableException;
import dev.idem.Outcome;
import dev.idem.failover.Endpoint.Broker;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.awaitility.Awaitility;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Messages flowing through a primary switch: on one broker (RabbitMQ or Kafka), one queue or topic
 * per consumer style (a per-message {@link Handler} with default batching, a {@link BatchHandler}
 * with default batching, and a {@link Handler} with one transaction per message), each consumer on
 * its own pool over the formation's multi-host URL, its own inbox and business table. A publisher
 * sends a steady stream with repeated ids and a few poison messages until {@link #stopPublishing()}.
 */
final class SwitchWorkload implements AutoCloseable {

  /** The consumer styles that run side by side through every switch. */
  enum Style {
    HANDLER_BATCHED, BATCH_HANDLER, PER_MESSAGE
  }

  private static final int PER_TICK = 2;
  private static final Duration TICK = Duration.ofMillis(25);

  final Broker broker;
  final Formation formation;
  final List<Lane> lanes = new ArrayList<>();
  private final AtomicLong sequence = new AtomicLong();
  private Disposable publisher;
  private boolean stopped;
  /** The monitor's last event before this workload, so that a failed check prints the switch's events. */
  private final long firstEvent;
  /** Which node answered as writable, and the monitor's states, whenever that changed (polled every 200 ms). */
  private final Timeline timeline;

  /** One consumer style's queue or topic, tables, pool, consumer and what it settled. */
  final class Lane {
    final Style style;
    /** The consumer's name, also its queue's or topic's. */
    final String name = PostgresService.uniqueName("failover");
    final String effects = PostgresService.uniqueName("failover_effects");
    final PostgresInbox inbox;
    final ConnectionPool pool;
    final Endpoint endpoint;
    /** Published deliveries per id (repeats count twice). */
    final ConcurrentHashMap<String, AtomicInteger> published = new ConcurrentHashMap<>();
    final Set<String> poison = ConcurrentHashMap.newKeySet();
    final ConcurrentLinkedQueue<Outcome<String>> outcomes = new ConcurrentLinkedQueue<>();
    /** System.nanoTime() of each PROCESSED outcome, in order. */
    final ConcurrentLinkedQueue<Long> processedAt = new ConcurrentLinkedQueue<>();
    Disposable running;

    Lane(Style style) {
      this.style = style;
      this.pool = PostgresConnections.pool(formation.failoverUrl(), 8);
      this.inbox = PostgresInbox.create(pool, PostgresService.uniqueName("failover_inbox"));
      Formation.query(formation.failoverUrl(), "CREATE TABLE " + effects + " (message_id text NOT NULL, body text NOT NULL,"
          + " server_port int NOT NULL DEFAULT inet_server_port(), committed_at timestamptz NOT NULL DEFAULT clock_timestamp())");
      inbox.createSchemaIfAbsent().block(Duration.ofSeconds(30));
      this.endpoint = broker.open(name);
    }

    String label() {
      return broker + " " + style;
    }

    void start() {
      IdempotentConsumer.Builder<String> builder = IdempotentConsumer.<String>named(name).inbox(inbox).concurrency(8);
      String insert = "INSERT INTO " + effects + " (message_id, body) VALUES ($1, $2)";
      switch (style) {
        case HANDLER_BATCHED -> builder.handler(handler(insert));
        case PER_MESSAGE -> builder.handler(handler(insert)).maxBatchSize(1);
        case BATCH_HANDLER -> builder.batchHandler(batchHandler());
      }
      IdempotentConsumer<String> consumer = builder.build();
      running = endpoint.receive().transform(consumer::process).subscribe(o -> {
        outcomes.add(o);
        if (o.status() == Outcome.Status.PROCESSED) {
          processedAt.add(System.nanoTime());
        }
      }, e -> System.err.println(label() + " pipeline failed: " + e));
    }

    private Handler<String> handler(String insert) {
      return (payload, tx) -> payload.startsWith("poison")
          ? Mono.error(new NonRetryableException("poison message " + tx.messageId()))
          : tx.sql(insert).bind(0, tx.messageId()).bind(1, payload).execute();
    }

    private BatchHandler<String> batchHandler() {
      String insertMany = "INSERT INTO " + effects + " (message_id, body) SELECT * FROM unnest($1::text[], $2::text[])";
      return (items, tx) -> {
        if (items.stream().anyMatch(i -> i.payload().startsWith("poison"))) {
          return Mono.error(new NonRetryableException("a poison message in the batch"));
        }
        return tx.sql(insertMany).bind(0, items.stream().map(BatchItem::messageId).toArray(String[]::new))
            .bind(1, items.stream().map(BatchItem::payload).toArray(String[]::new)).execute();
      };
    }

    int publishedCount() {
      return published.values().stream().mapToInt(AtomicInteger::get).sum();
    }

    long processedSince(long nanos) {
      return processedAt.stream().filter(t -> t >= nanos).count();
    }

    /** The first PROCESSED outcome at or after {@code nanos}. */
    long firstProcessedAfter(long nanos) {
      return processedAt.stream().filter(t -> t >= nanos).findFirst().orElse(-1L);
    }

    /**
     * Everything published is settled; each non-poison id has exactly one effect row on the
     * current primary, every acknowledged id among them; only the poison messages are dead-lettered;
     * the broker holds nothing unsettled ({@link Endpoint#assertSettled}).
     */
    void assertExactlyOnce() {
      String style = label();
      // Per id, not in total: a redelivery's second outcome must not stand in for another message's missing one.
      Awaitility.await(style + ": every published message settled").atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(200))
          .untilAsserted(() -> assertThat(unsettled())
              .as(() -> style + ": ids with fewer outcomes than deliveries (" + endpoint.describe() + ")")
              .isEmpty());
      Set<String> ids = new HashSet<>(published.keySet());
      ids.removeAll(poison);
      String rows = Formation.query(formation.failoverUrl(),
          "SELECT count(*) || ':' || count(DISTINCT message_id) FROM " + effects);
      String all = Formation.query(formation.failoverUrl(), "SELECT coalesce(string_agg(message_id, ','), '') FROM " + effects);
      Set<String> applied = new HashSet<>(List.of(all.split(",")));
      assertThat(rows).as(style + ": effect rows : distinct ids on the new primary (" + divergence(ids, applied) + ")")
          .isEqualTo(ids.size() + ":" + ids.size());
      Set<String> acked = new HashSet<>();
      List<Outcome<String>> deadLettered = new ArrayList<>();
      for (Outcome<String> o : outcomes) {
        if (o.status() == Outcome.Status.DEAD_LETTERED) {
          deadLettered.add(o);
        } else {
          acked.add(o.messageId());
        }
      }
      assertThat(applied).as(style + ": acknowledged ids missing on the new primary").containsAll(acked);
      assertThat(applied).as(style + ": applied ids").isEqualTo(ids);
      // At most one PROCESSED outcome per id (none when a commit whose answer was lost in the switch is found on the
      // retry). A redelivery (a Kafka consumer recreated or rebalanced, a RabbitMQ channel that closed) may add
      // DUPLICATEs, and dead letters are at least once (docs/operating.md): the contract is one effect per id,
      // not one outcome per delivery.
      Map<String, List<Outcome.Status>> statuses = statusesById();
      assertThat(statuses.entrySet()).as(style + ": ids processed more than once (" + divergence(ids, applied) + ")")
          .filteredOn(e -> e.getValue().stream().filter(st -> st == Outcome.Status.PROCESSED).count() > 1)
          .isEmpty();
      int beyond = outcomes.size() - publishedCount();
      if (beyond > 0) {
        System.out.println(
            style + ": " + beyond + " outcome(s) beyond the deliveries (redeliveries: duplicates, or a dead letter again)");
      }
      assertThat(deadLettered).as(style + ": dead letters (only the poison messages, never a failover error)")
          .allSatisfy(o -> {
            assertThat(poison).contains(o.messageId());
            assertThat(o.deadLetter().reason()).isEqualTo(DeadLetterReason.NON_RETRYABLE_ERROR);
          });
      assertThat(deadLettered.stream().map(Outcome::messageId).distinct().count()).isEqualTo(poison.size());
      endpoint.assertSettled(style, deadLettered.stream().map(Outcome::messageId).toList());
    }

    /** The ids with fewer outcomes than deliveries published. */
    List<String> unsettled() {
      Map<String, List<Outcome.Status>> settled = statusesById();
      return published.entrySet().stream().filter(e -> settled.getOrDefault(e.getKey(), List.of()).size() < e.getValue().get())
          .map(Map.Entry::getKey).sorted().toList();
    }

    private Map<String, List<Outcome.Status>> statusesById() {
      Map<String, List<Outcome.Status>> statuses = new TreeMap<>();
      outcomes.forEach(o -> statuses.computeIfAbsent(String.valueOf(o.messageId()), k -> new ArrayList<>()).add(o.status()));
      return statuses;
    }

    /** What a failed check needs: the ids applied and not, their outcomes, and outcomes beyond the deliveries. */
    private String divergence(Set<String> expected, Set<String> applied) {
      Map<String, List<Outcome.Status>> statuses = statusesById();
      List<String> missing = expected.stream().filter(id -> !applied.contains(id)).sorted(NUMERIC).toList();
      List<String> extra = statuses.entrySet().stream()
          .filter(e -> e.getValue().size() > published.getOrDefault(e.getKey(), new AtomicInteger()).get())
          .map(e -> e.getKey() + "=" + e.getValue()).toList();
      Map<String, Long> missingByKey = missing.stream()
          .collect(Collectors.groupingBy(id -> "account-" + Long.parseLong(id.substring(2)) % 16, TreeMap::new,
              Collectors.counting()));
      return "not applied: " + missing.size() + " " + abbreviate(missing.stream().map(id -> id + "=" + statuses.get(id)).toList())
          + " by key " + missingByKey
          + "; outcomes beyond the deliveries: " + extra.size() + " " + abbreviate(extra)
          + "; applied but never published: " + applied.stream().filter(id -> !expected.contains(id) && !id.isEmpty()).count()
          + "; " + endpoint.describe()
          + "; rows by the server that wrote them: " + rowsByServer()
          + "\nnodes as the test saw them:\n" + timeline
          + "\nthe monitor's events:\n" + formation.eventsSince(firstEvent);
    }

    /** On each node that answers: its rows per port that wrote them, with the first and last id and time. */
    private String rowsByServer() {
      StringBuilder b = new StringBuilder();
      for (String node : Formation.NODES) {
        String rows;
        try {
          rows = Formation.query(formation.nodeUrl(node),
              "SELECT string_agg(server_port || ': ' || n || ' rows, m-' || lo || '..m-' || hi"
                  + " || ' at ' || t0 || '..' || t1, '; ') FROM (SELECT server_port, count(*) n, min(substr(message_id, 3)::int) lo,"
                  + " max(substr(message_id, 3)::int) hi, to_char(min(committed_at), 'HH24:MI:SS.MS') t0,"
                  + " to_char(max(committed_at), 'HH24:MI:SS.MS') t1 FROM " + effects + " GROUP BY server_port) s");
        } catch (RuntimeException e) {
          rows = "unreachable (" + e.getMessage() + ")";
        }
        b.append(node).append(" :").append(formation.port(node)).append(" holds {").append(rows).append("} ");
      }
      return b.toString();
    }

    void close() {
      if (running != null) {
        running.dispose();
      }
      try {
        endpoint.close();
      } finally {
        pool.dispose();
      }
    }
  }

  SwitchWorkload(Formation formation, Broker broker) {
    this.formation = formation;
    this.broker = broker;
    this.firstEvent = formation.lastEventId();
    this.timeline = new Timeline(formation);
    for (Style style : Style.values()) {
      lanes.add(new Lane(style));
    }
  }

  /** Starts the consumers and a steady publisher: {@value #PER_TICK} messages per queue every 25 ms, 1 in 10 repeated, 1 in 400 poison. */
  void start() {
    lanes.forEach(Lane::start);
    publisher = Flux.interval(TICK).onBackpressureDrop().publishOn(Schedulers.boundedElastic(), 1)
        .subscribe(tick -> publishTick());
  }

  private synchronized void publishTick() {
    if (stopped) {
      return;
    }
    for (int i = 0; i < PER_TICK; i++) {
      long n = sequence.incrementAndGet();
      boolean poison = n % 400 == 0;
      String id = "m-" + n;
      String body = (poison ? "poison-" : "payment-") + n;
      List<Endpoint.Message> batch = new ArrayList<>();
      batch.add(new Endpoint.Message(id, "account-" + n % 16, body));
      if (n % 10 == 0 && n > 5) {
        batch.add(new Endpoint.Message("m-" + (n - 5), "account-" + (n - 5) % 16, "payment-" + (n - 5)));
      }
      for (Lane lane : lanes) {
        if (poison) {
          lane.poison.add(id);
        }
        for (Endpoint.Message m : batch) {
          lane.published.computeIfAbsent(m.id(), k -> new AtomicInteger()).incrementAndGet();
        }
        lane.endpoint.publish(batch);
      }
    }
  }

  /** Waits until every consumer processed {@code count} more messages since {@code nanos}. */
  void awaitProcessedSince(long nanos, int count, String what) {
    Awaitility.await(what).atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(100))
        .until(() -> lanes.stream().allMatch(l -> l.processedSince(nanos) >= count));
  }

  /** Stops the publisher; returns after its last tick was sent. */
  synchronized void stopPublishing() {
    stopped = true;
    if (publisher != null) {
      publisher.dispose();
    }
  }

  /** Publishing stopped: each lane settles everything and holds its contract. */
  void assertExactlyOnce() {
    stopPublishing();
    lanes.forEach(Lane::assertExactlyOnce);
  }

  /** Prints the time from a switch's trigger to the first commit on the new primary, per consumer style. */
  void report(String what, long triggeredAt, long newPrimaryAt) {
    StringBuilder b = new StringBuilder(broker + ", " + what)
        .append(String.format(": new primary writable %.2f s after the trigger", (newPrimaryAt - triggeredAt) / 1e9));
    for (Lane lane : lanes) {
      long first = lane.firstProcessedAfter(newPrimaryAt);
      b.append(String.format("; %s first commit %.2f s after the trigger (%.2f s after the new primary)", lane.style,
          (first - triggeredAt) / 1e9, (first - newPrimaryAt) / 1e9));
    }
    System.out.println(b);
    System.out.println("nodes as the test saw them:\n" + timeline);
  }

  /** Ids in publishing order ("m-12" before "m-100"). */
  private static final Comparator<String> NUMERIC = Comparator.comparingLong(id -> Long.parseLong(id.substring(2)));

  private static String abbreviate(List<String> items) {
    return items.size() <= 40
        ? items.toString()
        : items.subList(0, 20) + " ... " + items.subList(items.size() - 20, items.size());
  }

  @Override
  public void close() {
    timeline.close();
    stopPublishing();
    for (Lane lane : lanes) {
      lane.close();
    }
  }
}
