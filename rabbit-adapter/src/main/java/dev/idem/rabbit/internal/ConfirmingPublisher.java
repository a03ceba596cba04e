package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Return;
import com.rabbitmq.client.ShutdownSignalException;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import dev.idem.rabbit.RabbitHeaders;
import java.io.IOException;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Schedulers;

/**
 * Publishes messages with RabbitMQ publisher confirms on amqp-client alone (no Reactor RabbitMQ),
 * for the dead letters of a source and the outbox publisher.
 *
 * <p>Guarantees:
 * <ul>
 *   <li>{@link #publish} completes only when the broker confirmed the message ({@code basic.ack});
 *       it errors when the broker nacks it, returns it (every message is published with the
 *       {@code mandatory} flag, so an unroutable message fails instead of vanishing: the error says
 *       "unroutable" and names the exchange and routing key), or when the publishing channel
 *       closes before the confirm (the message may or may not have been routed then; the error
 *       says so and gives the channel's close reason). Nothing is retried here: callers retry.</li>
 *   <li>All publishes go through one dedicated channel in confirm mode, used by one dedicated
 *       daemon thread ({@code idem-rabbit-publish-<name>}), so the channel is never used by two
 *       threads at once; they are pipelined (a publish does not wait for the previous confirm).
 *       A channel found closed is replaced by a new one, on the connection the opener gives, at
 *       the next publish.</li>
 *   <li>Outcomes are signalled on a Reactor parallel thread, never on the client's connection
 *       thread, so callers may block or use the client there.</li>
 *   <li>A publish cancelled before it reached the channel is not sent; one cancelled after (a
 *       caller's timeout) forgets its confirm. There is no timeout of its own: callers bound the
 *       wait.</li>
 *   <li>A throwable out of the client or of the user's client hooks (metrics or observation
 *       collectors), {@link Error}s included, fails that publish and closes its channel (the
 *       client has counted a sequence number the broker may never see, so later confirms could
 *       not be matched); the publishes that channel still awaited fail as for any closure, and
 *       the next publish opens a new channel. A JVM error ({@link JvmErrors#isFatal}) travels
 *       as a {@link JvmErrors.Signalled}.</li>
 * </ul>
 *
 * <p>A broker return carries no sequence number, so every message gets the header
 * {@link RabbitHeaders#PUBLISH_SEQUENCE} with its channel's publish sequence number, which matches
 * a return to its publish. After {@link #close()} every publish fails.
 */
public final class ConfirmingPublisher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ConfirmingPublisher.class);
  private static final long CLOSE_WAIT_MILLIS = 5_000;

  private final String name;
  private final ChannelOpener opener;
  private final ExecutorService thread;
  private volatile boolean closed;
  /** Only touched on {@link #thread}, and by {@link #close()} after that thread ended. */
  private @Nullable ConfirmChannel current;

  /**
   * Creates a publisher; nothing is opened until the first publish.
   *
   * @param name names the publishing thread and appears in errors
   * @param opener opens a new channel (on the connection of the caller's choice) when there is no
   *     open one; called on the publishing thread
   */
  public ConfirmingPublisher(String name, ChannelOpener opener) {
    this.name = Objects.requireNonNull(name, "name");
    this.opener = Objects.requireNonNull(opener, "opener");
    this.thread = Executors.newSingleThreadExecutor(task -> {
      Thread t = new Thread(task, "idem-rabbit-publish-" + name);
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Publishes one message with the {@code mandatory} flag and waits for the broker's confirm.
   *
   * @param exchange the exchange ({@code ""} for the default exchange)
   * @param routingKey the routing key
   * @param properties the message properties; its headers are copied, not changed
   * @param body the body
   * @return completes when the broker confirmed the message; errors as the class describes
   */
  public Mono<Void> publish(String exchange, String routingKey, AMQP.BasicProperties properties, byte[] body) {
    return Mono.<Void>create(sink -> {
      Outbound message = new Outbound(exchange, routingKey, properties, body, sink);
      sink.onCancel(message::cancel);
      try {
        thread.execute(() -> send(message));
      } catch (RejectedExecutionException e) {
        sink.error(closedError());
      }
    }).publishOn(Schedulers.parallel());
  }

  private void send(Outbound message) {
    if (message.cancelled) {
      return;
    }
    try {
      if (closed) {
        message.sink.error(closedError());
        return;
      }
      channel().publish(message);
    } catch (Throwable e) {
      Error fatal = JvmErrors.fatalIn(e);
      message.sink.error(fatal != null ? new JvmErrors.Signalled(fatal) : e);
    }
  }

  private ConfirmChannel channel() throws IOException, TimeoutException {
    if (current == null || current.broken || !current.channel.isOpen()) {
      if (current != null) {
        current.failAll(
            new IOException("the publishing channel of '" + name + "' was replaced before the broker confirmed the message;"
                + " it may or may not have been routed"));
      }
      Channel channel = opener.open();
      if (channel == null) {
        throw new IOException("no channel available for publisher '" + name + "' (the connection's channel limit is reached)");
      }
      current = new ConfirmChannel(channel);
    }
    return current;
  }

  private IllegalStateException closedError() {
    return new IllegalStateException("the RabbitMQ publisher '" + name + "' is closed");
  }

  /**
   * Stops publishing: later and queued publishes fail, the channel is closed, and publishes still
   * waiting for their confirm fail (as for any channel closure). Does not close the connection.
   */
  @Override
  public void close() {
    closed = true;
    thread.shutdown();
    try {
      if (!thread.awaitTermination(CLOSE_WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
        log.warn("Publisher '{}' did not finish its current publish within {} ms of close", name, CLOSE_WAIT_MILLIS);
        return;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    ConfirmChannel last = current;
    if (last != null && last.channel.isOpen()) {
      try {
        last.channel.close();
      } catch (IOException | TimeoutException | RuntimeException e) {
        log.debug("Closing the channel of publisher '{}' failed: {}", name, LogText.error(e));
      }
    }
    if (last != null) {
      last.failAll(closedError());
    }
  }

  @Override
  public String toString() {
    return "ConfirmingPublisher[" + name + "]";
  }

  /** Opens a channel for publishing. */
  @FunctionalInterface
  public interface ChannelOpener {
    /**
     * Opens a new channel.
     *
     * @return the channel, or {@code null} when the connection has no channel left
     * @throws IOException when the broker cannot be reached
     * @throws TimeoutException when connecting timed out
     */
    @Nullable
    Channel open() throws IOException, TimeoutException;
  }

  /** One publish and its caller's sink; completed at most once (whoever removes it from the pending map). */
  private static final class Outbound {
    final String exchange;
    final String routingKey;
    final AMQP.BasicProperties properties;
    final byte[] body;
    final MonoSink<Void> sink;
    volatile boolean cancelled;
    volatile @Nullable Return returned;
    private volatile @Nullable ConfirmChannel channel;
    private volatile long sequence;

    Outbound(String exchange, String routingKey, AMQP.BasicProperties properties, byte[] body, MonoSink<Void> sink) {
      this.exchange = exchange;
      this.routingKey = routingKey;
      this.properties = properties;
      this.body = body;
      this.sink = sink;
    }

    /** The caller cancelled: not sent when it was not yet, its confirm forgotten when it was. */
    void cancel() {
      cancelled = true;
      ConfirmChannel on = channel;
      if (on != null) {
        on.pending.remove(sequence, this);
      }
    }

    void sentOn(ConfirmChannel on, long sequence) {
      this.sequence = sequence;
      this.channel = on;
    }

    String target() {
      return "exchange '" + LogText.id(exchange) + "' with routing key '" + LogText.id(routingKey) + "'";
    }
  }

  /** A channel in confirm mode and the publishes on it still waiting for their confirm. */
  private final class ConfirmChannel {
    final Channel channel;
    private final ConcurrentNavigableMap<Long, Outbound> pending = new ConcurrentSkipListMap<>();
    private volatile @Nullable ShutdownSignalException closedBy;
    private volatile boolean broken;

    ConfirmChannel(Channel channel) throws IOException {
      this.channel = channel;
      channel.addShutdownListener(this::closed);
      channel.addReturnListener(this::returned);
      channel.addConfirmListener((tag, multiple) -> confirmed(tag, multiple, false),
          (tag, multiple) -> confirmed(tag, multiple, true));
      try {
        channel.confirmSelect();
      } catch (IOException | RuntimeException e) {
        channel.abort();
        throw e;
      }
    }

    void publish(Outbound message) throws IOException {
      long sequence = channel.getNextPublishSeqNo();
      pending.put(sequence, message);
      message.sentOn(this, sequence);
      if (message.cancelled) {
        pending.remove(sequence, message);
        return;
      }
      try {
        channel.basicPublish(message.exchange, message.routingKey, true, withSequence(message.properties, sequence),
            message.body);
      } catch (Throwable e) {
        pending.remove(sequence, message);
        // The client counted the sequence number before the frame went out (or the frame went
        // out and a hook failed after): this channel's numbers can no longer be trusted, so it is
        // closed, failing what it still awaits, and the next publish opens a new one.
        abort();
        throw new IOException("publishing to " + message.target() + " failed (the message may or may not have reached the broker;"
            + " the channel was closed and will be replaced): " + LogText.error(e), e);
      }
      // The shutdown listener fails what is pending when it runs; a publish that came after it
      // (the client may accept one on a closing channel) is failed here.
      ShutdownSignalException cause = closedBy;
      if (cause != null && pending.remove(sequence, message)) {
        message.sink.error(channelClosed(message, cause));
      }
    }

    private void abort() {
      broken = true;
      try {
        channel.abort();
      } catch (IOException | RuntimeException e) {
        log.debug("Aborting the channel of publisher '{}' failed: {}", name, LogText.error(e));
      }
    }

    private AMQP.BasicProperties withSequence(AMQP.BasicProperties properties, long sequence) {
      Map<String, Object> headers = properties.getHeaders() == null ? new HashMap<>() : new HashMap<>(properties.getHeaders());
      headers.put(RabbitHeaders.PUBLISH_SEQUENCE, sequence);
      return properties.builder().headers(headers).build();
    }

    private void returned(Return message) {
      Map<String, Object> headers = message.getProperties().getHeaders();
      if (headers != null && headers.get(RabbitHeaders.PUBLISH_SEQUENCE) instanceof Number sequence) {
        Outbound outbound = pending.get(sequence.longValue());
        if (outbound != null) {
          outbound.returned = message;
        }
      }
    }

    private void confirmed(long tag, boolean multiple, boolean nacked) {
      if (multiple) {
        Iterator<Map.Entry<Long, Outbound>> confirmed = pending.headMap(tag, true).entrySet().iterator();
        while (confirmed.hasNext()) {
          Map.Entry<Long, Outbound> entry = confirmed.next();
          if (pending.remove(entry.getKey(), entry.getValue())) {
            settle(entry.getValue(), nacked);
          }
        }
      } else {
        Outbound message = pending.remove(tag);
        if (message != null) {
          settle(message, nacked);
        }
      }
    }

    private void settle(Outbound message, boolean nacked) {
      Return returned = message.returned;
      if (returned != null) {
        message.sink.error(new IOException("unroutable: the broker returned the message (" + returned.getReplyCode() + " "
            + LogText.cut(returned.getReplyText()) + "); no queue is bound to " + message.target()));
      } else if (nacked) {
        message.sink.error(new IOException("the broker nacked the message published to " + message.target()
            + " (it could not take responsibility for it)"));
      } else {
        message.sink.success();
      }
    }

    private void closed(ShutdownSignalException cause) {
      closedBy = cause;
      Iterator<Map.Entry<Long, Outbound>> unconfirmed = pending.entrySet().iterator();
      while (unconfirmed.hasNext()) {
        Map.Entry<Long, Outbound> entry = unconfirmed.next();
        if (pending.remove(entry.getKey(), entry.getValue())) {
          entry.getValue().sink.error(channelClosed(entry.getValue(), cause));
        }
      }
    }

    void failAll(Throwable error) {
      Iterator<Map.Entry<Long, Outbound>> unconfirmed = pending.entrySet().iterator();
      while (unconfirmed.hasNext()) {
        Map.Entry<Long, Outbound> entry = unconfirmed.next();
        if (pending.remove(entry.getKey(), entry.getValue())) {
          entry.getValue().sink.error(error);
        }
      }
    }

    private IOException channelClosed(Outbound message, ShutdownSignalException cause) {
      return new IOException(
          "the publishing channel of '" + name + "' closed before the broker confirmed the message published to "
              + message.target() + "; it may or may not have been routed: " + LogText.cut(cause.getMessage()),
          cause);
    }
  }
}
