package dev.idem.spring;

import dev.idem.postgres.PostgresInbox;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import reactor.core.publisher.Flux;

/**
 * Runs the application's Idem consumers, those declared under {@code idem.consumers.*} and those
 * declared as {@link IdemConsumerDefinition} beans, as one {@link SmartLifecycle}.
 *
 * <p><b>Start</b>: in phase {@value #PHASE}, late in the context's start (after the web server and
 * most other lifecycles): the inbox table is created when {@code idem.inbox.create-schema} is on,
 * then each consumer subscribes to its source. A consumer whose source cannot be created (an
 * invalid setting the adapter refuses, such as a Kafka engine that the client versions on the
 * class path cannot run) fails the start, and with it the application's; the consumers started
 * before it are stopped first. A consumer whose stream ends (the source failed for good or
 * completed) is not restarted; its health turns DOWN.
 *
 * <p><b>Stop</b>: early in the context's shutdown (the highest phases stop first), and in any case
 * before the singletons, the R2DBC connection pool among them, are destroyed. Each consumer stops
 * taking messages, gives those in flight its shutdown grace period, cancels what is left (rolled
 * back, redelivered later) and closes its source. Spring waits at most
 * {@code spring.lifecycle.timeout-per-shutdown-phase} (30 s by default) for all of them.
 */
public final class IdemConsumers implements SmartLifecycle {

  /** The lifecycle phase: {@value}. */
  public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 512;
  /** The longest wait for the inbox table at start: 60 s. */
  public static final Duration SCHEMA_TIMEOUT = Duration.ofSeconds(60);

  private static final Logger log = LoggerFactory.getLogger(IdemConsumers.class);

  private final Map<String, ManagedConsumer> consumers = new LinkedHashMap<>();
  private final PostgresInbox inbox;
  private final boolean createSchema;
  private final boolean autoStartup;
  private volatile boolean running;

  IdemConsumers(List<ManagedConsumer> consumers, PostgresInbox inbox, boolean createSchema, boolean autoStartup) {
    for (ManagedConsumer consumer : consumers) {
      if (this.consumers.putIfAbsent(consumer.name(), consumer) != null) {
        throw new IllegalStateException("two Idem consumers are named '" + consumer.name()
            + "' (in idem.consumers.* or as IdemConsumerDefinition beans); the name is part of the dedup key and must be unique");
      }
    }
    this.inbox = Objects.requireNonNull(inbox, "inbox");
    this.createSchema = createSchema;
    this.autoStartup = autoStartup;
  }

  /**
   * The consumers, in declaration order.
   *
   * @return the consumers
   */
  public List<ManagedConsumer> consumers() {
    return List.copyOf(consumers.values());
  }

  /**
   * A consumer by name.
   *
   * @param name the name
   * @return the consumer, if there is one
   */
  public Optional<ManagedConsumer> consumer(String name) {
    return Optional.ofNullable(consumers.get(name));
  }

  @Override
  public synchronized void start() {
    if (running) {
      return;
    }
    if (createSchema && !consumers.isEmpty()) {
      inbox.createSchemaIfAbsent().block(SCHEMA_TIMEOUT);
    }
    for (ManagedConsumer consumer : consumers.values()) {
      try {
        consumer.start();
      } catch (RuntimeException | Error e) {
        // A consumer that cannot start (for example a Kafka engine its client versions do not
        // support) fails the application's start; those started before it stop first, so that
        // no polling thread outlives the failed context.
        stopStarted(e);
        if (e instanceof Error error) {
          throw error;
        }
        throw new IllegalStateException("Idem consumer '" + consumer.name() + "' could not start: " + e.getMessage(), e);
      }
    }
    running = true;
  }

  private void stopStarted(Throwable cause) {
    try {
      Flux.fromIterable(consumers.values()).flatMap(ManagedConsumer::stop).then().block();
    } catch (RuntimeException e) {
      cause.addSuppressed(e);
    }
  }

  @Override
  public void stop() {
    Flux.fromIterable(consumers.values()).flatMap(ManagedConsumer::stop).then().block();
    running = false;
  }

  @Override
  public void stop(Runnable callback) {
    Flux.fromIterable(consumers.values())
        .flatMap(ManagedConsumer::stop)
        .then()
        .doFinally(signal -> running = false)
        .subscribe(null, error -> {
          log.warn("Stopping the Idem consumers failed: {}", error.toString());
          callback.run();
        }, callback);
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public boolean isAutoStartup() {
    return autoStartup;
  }

  @Override
  public int getPhase() {
    return PHASE;
  }

  @Override
  public String toString() {
    return "IdemConsumers" + consumers.values();
  }
}
