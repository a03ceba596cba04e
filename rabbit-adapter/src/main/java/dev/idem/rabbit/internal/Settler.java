package dev.idem.rabbit.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import dev.idem.DeadLetter;
import dev.idem.internal.JvmErrors;
import dev.idem.internal.LogText;
import dev.idem.rabbit.DeadLetterMode;
import dev.idem.rabbit.RabbitHeaders;
import dev.idem.rabbit.RabbitSourceOptions;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * Settles deliveries: acks (coalesced by an {@link AckCoalescer}) and rejects on a dedicated
 * single thread (never a database or event-loop thread), dead-letter publishes through a
 * {@link ConfirmingPublisher} (publisher confirms, the {@code mandatory} flag) on its own channel
 * of the source's connection, each confirm awaited at most
 * {@link RabbitSourceOptions#confirmTimeout()}.
 */
public final class Settler implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(Settler.class);
  private static final int MAX_HEADER_TEXT = 1_000;

  private final RabbitSourceOptions options;
  private final Scheduler ackScheduler;
  private final ConfirmingPublisher publisher;
  private final AckCoalescer acks;

  /**
   * Creates the settler.
   *
   * @param options the source options
   * @param connections the source's connections, shared with the dead-letter publisher
   */
  public Settler(RabbitSourceOptions options, ConnectionHolder connections) {
    this.options = options;
    this.ackScheduler = Schedulers.newSingle("idem-rabbit-ack-" + options.queue(), true);
    this.publisher = new ConfirmingPublisher("dead-letters-" + options.queue(), () -> connections.get().createChannel());
    this.acks = new AckCoalescer(ackScheduler, Math.max(1, options.prefetch() / 2),
        Duration.ofMillis(AckCoalescer.DEFAULT_MAX_HOLD_MILLIS));
  }

  /** Acknowledges on the delivery's channel, coalesced with the acks around it ({@link AckCoalescer}). */
  Mono<Void> ack(RabbitDelivery<?> delivery) {
    return acks.ack(delivery);
  }

  /**
   * Sends the acks held for coalescing on {@code session}'s channel; completes once they are
   * written. Called before the channel closes on a stop.
   *
   * @param session the channel's session
   * @return completes when sent (or at once when the settler is closed)
   */
  Mono<Void> flush(ConsumerSession session) {
    return acks.flush(session);
  }

  /**
   * Sends every held ack of every channel, waiting at most {@code timeout}: called before the
   * connection closes.
   *
   * @param timeout the longest wait
   */
  void flushAll(Duration timeout) {
    try {
      acks.flushAll().block(timeout);
    } catch (RuntimeException e) {
      // On the settling thread itself, or past the timeout: the channels close and the broker
      // redelivers what they held; the consumer's dedup acknowledges the copies.
      log.debug("Held acks of queue '{}' not flushed before close: {}", options.queue(), LogText.error(e));
    }
  }

  /**
   * {@code basic.ack} frames sent so far: with coalescing, fewer than {@link #acknowledged()}.
   *
   * @return the frame count
   */
  public long ackFrames() {
    return acks.frames();
  }

  /**
   * Deliveries acknowledged by those frames.
   *
   * @return the count
   */
  public long acknowledged() {
    return acks.acks();
  }

  /**
   * Dead-letters a delivery: publishes the dead letter with confirms (retried while the delivery's
   * channel is open), then acks the original on its channel.
   *
   * <p>At most one dead letter is published per delivery, however often its settlement is run: a
   * run that finds the delivery's channel closed publishes nothing (the broker redelivers the
   * message, and the redelivery is dead-lettered), and a run after a confirmed publish only
   * retries the ack. So a channel lost between the confirm and the ack costs exactly one extra
   * copy in the dead-letter queue, the one of the redelivery.
   */
  Mono<Void> deadLetter(RabbitDelivery<?> delivery, DeadLetter deadLetter) {
    long tag = delivery.envelope().getDeliveryTag();
    if (options.deadLetterMode() == DeadLetterMode.REJECT_TO_QUEUE_DLX) {
      return onChannel(delivery, "reject", channel -> channel.basicReject(tag, false));
    }
    Mono<Void> ack = onChannel(delivery, "ack after the confirmed dead-letter publish",
        " (the dead letter is in the dead-letter queue; the redelivered message will be dead-lettered again,"
            + " one more copy there)",
        channel -> channel.basicAck(tag, false));
    return Mono.defer(() -> {
      if (delivery.deadLetterConfirmed()) {
        return ack;
      }
      if (!delivery.session().isOpen()) {
        delivery.release();
        return Mono.error(new SettlementException("dead letter of message '" + delivery.idForLogs()
            + "' not published: its channel is gone and the broker will redeliver the message, to be dead-lettered then", null));
      }
      return publish(delivery, deadLetter)
          // A failed publish is retried while the delivery can still be acknowledged; once its
          // channel is gone the broker redelivers the message and it is dead-lettered again then.
          .retryWhen(Retry.backoff(Long.MAX_VALUE, options.recoveryBackoff())
              .maxBackoff(options.maxRecoveryBackoff())
              .filter(error -> delivery.session().isOpen() && !JvmErrors.isFatal(error))
              .doBeforeRetry(signal -> log.warn("Dead-letter publish of message '{}' to exchange '{}' failed, retrying: {}",
                  delivery.idForLogs(), LogText.id(options.deadLetterExchange()), LogText.error(signal.failure()))))
          .onErrorMap(error -> !(error instanceof SettlementException) && !JvmErrors.isFatal(error), error -> {
            if (!delivery.session().isOpen()) {
              delivery.release();
            }
            return new SettlementException("dead-letter publish of message '" + delivery.idForLogs()
                + "' failed and its channel is gone; the broker will redeliver the message", error);
          })
          .doOnSuccess(ignored -> delivery.markDeadLetterConfirmed())
          .then(ack);
    });
  }

  private Mono<Void> publish(RabbitDelivery<?> delivery, DeadLetter deadLetter) {
    return Mono.defer(() -> publisher.publish(options.deadLetterExchange(), options.deadLetterRoutingKey(),
        deadLetterProperties(delivery, deadLetter), delivery.body()))
        .timeout(options.confirmTimeout(),
            Mono.error(() -> new TimeoutException("the broker did not confirm the dead letter within "
                + options.confirmTimeout() + " (confirmTimeout)")));
  }

  AMQP.BasicProperties deadLetterProperties(RabbitDelivery<?> delivery, DeadLetter deadLetter) {
    AMQP.BasicProperties original = delivery.properties();
    Map<String, Object> headers = original.getHeaders() == null ? new HashMap<>() : new HashMap<>(original.getHeaders());
    headers.put(RabbitHeaders.REASON, deadLetter.reason().name());
    headers.put(RabbitHeaders.DETAIL, truncate(deadLetter.detail()));
    if (deadLetter.errorClass() != null) {
      headers.put(RabbitHeaders.ERROR_CLASS, deadLetter.errorClass());
    } else {
      headers.remove(RabbitHeaders.ERROR_CLASS);
    }
    if (deadLetter.errorMessage() != null) {
      headers.put(RabbitHeaders.ERROR_MESSAGE, truncate(deadLetter.errorMessage()));
    } else {
      headers.remove(RabbitHeaders.ERROR_MESSAGE);
    }
    headers.put(RabbitHeaders.CONSUMER, deadLetter.consumer());
    headers.put(RabbitHeaders.ATTEMPTS, deadLetter.attempts());
    headers.put(RabbitHeaders.DELIVERY_ATTEMPT, delivery.deliveryAttempt());
    headers.put(RabbitHeaders.ORIGINAL_EXCHANGE, delivery.envelope().getExchange());
    headers.put(RabbitHeaders.ORIGINAL_ROUTING_KEY, delivery.envelope().getRoutingKey());
    headers.put(RabbitHeaders.ORIGINAL_QUEUE, delivery.queue());
    headers.put(RabbitHeaders.DEAD_LETTERED_AT, Instant.now().toString());
    return original.builder().headers(headers).deliveryMode(2).build();
  }

  private static String truncate(String text) {
    return text.length() <= MAX_HEADER_TEXT ? text : text.substring(0, MAX_HEADER_TEXT);
  }

  private Mono<Void> onChannel(RabbitDelivery<?> delivery, String what, ChannelAction action) {
    return onChannel(delivery, what, "", action);
  }

  /**
   * Runs a settlement on the delivery's own channel, on the ack thread; never on another channel.
   * The delivery stops counting as unsettled just before the broker is told (after, the broker may
   * already hand out the next message, which would count one above the prefetch), or once its
   * channel is gone (the broker then requeued it); a failure on an open channel counts it again.
   */
  private Mono<Void> onChannel(RabbitDelivery<?> delivery, String what, String consequence, ChannelAction action) {
    return Mono.<Void>fromRunnable(() -> {
      Channel channel = delivery.session().channel();
      if (!channel.isOpen()) {
        delivery.release();
        throw new SettlementException(what + " of message '" + delivery.idForLogs() + "' failed: its channel is gone"
            + " and the broker will redeliver the message" + consequence, null);
      }
      boolean released = delivery.release();
      try {
        action.run(channel);
        delivery.session().settled(delivery.envelope().getDeliveryTag());
        acks.settledOtherwise(delivery.session());
      } catch (Throwable e) {
        // The client runs the user's hooks (metrics and observation collectors) here: Errors too.
        if (released && channel.isOpen()) {
          delivery.restore();
        }
        Error fatal = JvmErrors.fatalIn(e);
        if (fatal != null) {
          throw new JvmErrors.Signalled(fatal);
        }
        throw new SettlementException(what + " of message '" + delivery.idForLogs() + "' failed; the broker will redeliver"
            + " the message" + consequence, e);
      }
    }).subscribeOn(ackScheduler);
  }

  @Override
  public void close() {
    publisher.close();
    ackScheduler.dispose();
  }

  @FunctionalInterface
  private interface ChannelAction {
    void run(Channel channel) throws IOException;
  }
}
