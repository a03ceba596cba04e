package dev.idem.rabbit.internal;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.internal.LogText;
import java.io.IOException;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * One broker connection at a time, reopened on demand when the previous one closed. Shared by a
 * source's consumer sessions and its dead-letter publisher; the outbox publisher has its own.
 */
public final class ConnectionHolder implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ConnectionHolder.class);

  private final ConnectionFactory factory;
  private final String name;
  private @Nullable Connection current;
  private boolean closed;

  /**
   * Creates a holder; no connection is opened yet.
   *
   * @param factory the client factory (automatic recovery off)
   * @param name the client-provided connection name
   */
  public ConnectionHolder(ConnectionFactory factory, String name) {
    this.factory = factory;
    this.name = name;
  }

  /**
   * The open connection, opening a new one when there is none. Blocking.
   *
   * @return the connection
   * @throws IOException when the broker cannot be reached
   * @throws TimeoutException when connecting timed out
   */
  public synchronized Connection get() throws IOException, TimeoutException {
    if (closed) {
      throw new IllegalStateException("RabbitMQ connection '" + name + "' is closed: its source or publisher was closed");
    }
    if (current == null || !current.isOpen()) {
      current = factory.newConnection(name);
      log.info("Opened RabbitMQ connection '{}' to {}:{}", name, factory.getHost(), factory.getPort());
    }
    return current;
  }

  /**
   * {@link #get()} on a bounded-elastic thread.
   *
   * @return the connection
   */
  public Mono<Connection> mono() {
    return Mono.fromCallable(this::get).subscribeOn(Schedulers.boundedElastic());
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return {@code true} once closed
   */
  public synchronized boolean isClosed() {
    return closed;
  }

  /** Closes the current connection (unacknowledged messages return to their queues). */
  @Override
  public void close() {
    Connection toClose;
    synchronized (this) {
      closed = true;
      toClose = current;
      current = null;
    }
    if (toClose != null && toClose.isOpen()) {
      try {
        toClose.close(5_000);
      } catch (IOException | RuntimeException e) {
        log.debug("Closing RabbitMQ connection '{}' failed: {}", name, LogText.error(e));
      }
    }
  }
}
