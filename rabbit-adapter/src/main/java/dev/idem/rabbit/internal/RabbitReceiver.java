package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.ShutdownSignalException;
import dev.idem.Delivery;
import dev.idem.internal.LogText;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSourceOptions;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * The consuming side of a RabbitMQ source: one channel with {@code basic.qos} and a manual-ack
 * consumer per session, and a new session (new channel, new connection when needed) after any
 * loss, with backoff.
 *
 * <p>Why not Reactor RabbitMQ's {@code Receiver.consumeManualAck}: it caches one connection for
 * its lifetime (a connection the broker closed is never replaced without the client's automatic
 * recovery), completes the {@code Flux} silently when the broker cancels the consumer, and its
 * default acknowledgement handler retries a failed ack on the recovered channel, where the old
 * delivery tag means nothing. Here every delivery settles on the channel that delivered it or not
 * at all.
 *
 * @param <T> the payload type
 */
public final class RabbitReceiver<T> implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(RabbitReceiver.class);

  /** Longest wait in {@link #close()} for the acks held for coalescing to be sent. */
  private static final Duration FLUSH_TIMEOUT = Duration.ofSeconds(5);

  private final RabbitSourceOptions options;
  private final PayloadDecoder<T> decoder;
  private final ConnectionHolder connections;
  private final Settler settler;
  private final AtomicReference<ConsumerSession> current = new AtomicReference<>();
  private final AtomicInteger peak = new AtomicInteger();
  private final AtomicInteger sessions = new AtomicInteger();

  /**
   * Creates a receiver; nothing connects until {@link #receive()} is subscribed.
   *
   * @param options the options
   * @param decoder the payload decoder
   */
  public RabbitReceiver(RabbitSourceOptions options, PayloadDecoder<T> decoder) {
    this.options = options;
    this.decoder = decoder;
    this.connections = new ConnectionHolder(options.newConnectionFactory(), options.connectionName());
    this.settler = new Settler(options, connections);
  }

  /**
   * The deliveries of the queue, resubscribing after every loss until cancelled or closed.
   *
   * @return the deliveries
   */
  public Flux<Delivery<T>> receive() {
    return Flux.defer(() -> connections.mono().flatMapMany(this::session))
        // Deliveries buffered from a channel that has since closed cannot be acknowledged; the
        // broker requeued them, so they are dropped here rather than processed for nothing.
        .filter(delivery -> delivery.session().isOpen())
        .retryWhen(Retry.backoff(Long.MAX_VALUE, options.recoveryBackoff())
            .maxBackoff(options.maxRecoveryBackoff())
            .transientErrors(true)
            .filter(error -> !connections.isClosed())
            .doBeforeRetry(signal -> log.warn("RabbitMQ consumer of queue '{}' lost ({}); resubscribing (attempt {})",
                options.queue(), LogText.error(signal.failure()), signal.totalRetriesInARow() + 1)))
        .onErrorResume(error -> connections.isClosed(), error -> Flux.empty())
        .<Delivery<T>>map(delivery -> delivery);
  }

  private Flux<RabbitDelivery<T>> session(Connection connection) {
    return Flux.<RabbitDelivery<T>>create(sink -> {
      Channel channel;
      try {
        channel = connection.createChannel();
        if (channel == null) {
          sink.error(new IOException("no channel available on connection " + options.connectionName()));
          return;
        }
        channel.basicQos(options.prefetch());
      } catch (IOException | RuntimeException e) {
        sink.error(e);
        return;
      }
      ConsumerSession session = new ConsumerSession(channel, peak);
      AtomicBoolean ended = new AtomicBoolean();
      channel.addShutdownListener(cause -> {
        if (ended.compareAndSet(false, true)) {
          sink.error(new ChannelLostException(options.queue(), cause));
        }
      });
      DefaultConsumer consumer = new DefaultConsumer(channel) {
        @Override
        public void handleDelivery(String consumerTag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
          session.arrived(envelope.getDeliveryTag());
          RabbitDelivery<T> delivery;
          try {
            delivery = toDelivery(session, envelope, properties, body);
          } catch (Throwable e) {
            // Not the user's code (toDelivery catches that) but the adapter's own: still never
            // let it close the channel. The message stays unacknowledged on this channel and is
            // redelivered when the channel closes.
            log.error("Could not read a message of queue '{}' (delivery tag {}); it stays unacknowledged: {}",
                options.queue(), envelope.getDeliveryTag(), LogText.error(e));
            return;
          }
          sink.next(delivery);
        }

        @Override
        public void handleCancel(String consumerTag) {
          if (ended.compareAndSet(false, true)) {
            sink.error(new IOException("the broker cancelled the consumer of queue '" + options.queue()
                + "' (queue deleted, or a cluster failover)"));
            closeAsync(channel);
          }
        }
      };
      try {
        channel.basicConsume(options.queue(), false, consumer);
      } catch (IOException | RuntimeException e) {
        if (ended.compareAndSet(false, true)) {
          sink.error(e);
        }
        closeAsync(channel);
        return;
      }
      current.set(session);
      sessions.incrementAndGet();
      log.info("Consuming queue '{}' with prefetch {} on connection '{}'", options.queue(), options.prefetch(),
          options.connectionName());
      sink.onDispose(() -> {
        ended.set(true);
        // Acks held for coalescing go out before the channel closes, or the broker would redeliver them.
        settler.flush(session).doFinally(signal -> closeAsync(channel)).subscribe(ignored -> {}, error -> {});
      });
    }, FluxSink.OverflowStrategy.BUFFER);
  }

  /**
   * Builds the delivery. Runs on the client's consumer thread, so nothing may escape it: a
   * throwable out of {@code handleDelivery} makes the client close the channel, the broker
   * requeues the message, and the next channel meets it again. Whatever the user's extractor,
   * decoder or ordering-key rule throws ({@link Error}s included) is caught and makes this one
   * message a dead letter instead.
   */
  private RabbitDelivery<T> toDelivery(ConsumerSession session, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
    AMQP.BasicProperties props = properties != null ? properties : new AMQP.BasicProperties();
    byte[] bytes = body != null ? body : new byte[0];
    String id = null;
    IllegalArgumentException idFailure = null;
    try {
      id = options.messageId().extract(envelope, props);
    } catch (IllegalArgumentException e) {
      idFailure = e;
    } catch (Throwable e) {
      idFailure = new IllegalArgumentException("the message id extractor (" + LogText.describe(options.messageId())
          + ") failed: " + LogText.error(e), e);
    }
    T payload = null;
    Throwable failure = null;
    try {
      payload = decoder.decode(bytes, props);
    } catch (Throwable e) {
      failure = e;
    }
    String key = null;
    try {
      key = options.orderingKey().apply(envelope, props);
    } catch (Throwable e) {
      if (failure == null) {
        failure = new IllegalStateException("the orderingKey rule failed: " + LogText.error(e), e);
      }
    }
    return new RabbitDelivery<>(session, settler, options.queue(), envelope, props, bytes, id, idFailure, payload, failure, key);
  }

  private static void closeAsync(Channel channel) {
    Schedulers.boundedElastic().schedule(() -> {
      try {
        if (channel.isOpen()) {
          channel.close();
        }
      } catch (IOException | TimeoutException | RuntimeException e) {
        // already closing; the broker requeues whatever was unacknowledged
      }
    });
  }

  /**
   * The ready-message count of a queue by a passive declare on a short-lived channel of this
   * receiver's connection.
   *
   * @param queue the queue
   * @return the count; errors when the queue does not exist or the broker is unreachable
   */
  public reactor.core.publisher.Mono<Long> readyCount(String queue) {
    return connections.mono().map(connection -> {
      try (Channel channel = connection.createChannel()) {
        return (long) channel.queueDeclarePassive(queue).getMessageCount();
      } catch (IOException | TimeoutException e) {
        throw new IllegalStateException("passive declare of queue '" + queue + "' failed", e);
      }
    });
  }

  /**
   * Deliveries of the current channel not yet settled.
   *
   * @return the count, 0 before the first subscription and while the channel is closed; never
   *     negative
   */
  public int unsettled() {
    ConsumerSession session = current.get();
    return session == null ? 0 : session.unsettled();
  }

  /**
   * The most deliveries ever unsettled at once on one channel.
   *
   * @return the high-water mark
   */
  public int peakUnsettled() {
    return peak.get();
  }

  /**
   * {@code basic.ack} frames sent so far.
   *
   * @return the frame count
   */
  public long ackFrames() {
    return settler.ackFrames();
  }

  /**
   * Deliveries acknowledged so far.
   *
   * @return the count
   */
  public long acknowledged() {
    return settler.acknowledged();
  }

  /**
   * How many consumer sessions (channel subscriptions) were started.
   *
   * @return 1 after the first subscription, more after recoveries
   */
  public int sessions() {
    return sessions.get();
  }

  @Override
  public void close() {
    settler.flushAll(FLUSH_TIMEOUT);
    connections.close();
    settler.close();
  }

  /** The consuming channel or its connection closed. */
  static final class ChannelLostException extends IOException {
    private static final long serialVersionUID = 1L;

    ChannelLostException(String queue, ShutdownSignalException cause) {
      super("channel consuming queue '" + queue + "' closed: " + LogText.cut(cause.getMessage()), cause);
    }
  }
}
