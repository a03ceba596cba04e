package dev.idem.rabbit.internal;

import com.rabbitmq.client.Channel;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One channel's consumer: the channel that delivered (and must settle) its messages, and how many
 * of them are not settled yet.
 */
public final class ConsumerSession {

  private final Channel channel;
  private final AtomicInteger unsettled = new AtomicInteger();
  private final AtomicInteger peak;

  /**
   * Creates a session.
   *
   * @param channel the consuming channel
   * @param peak the source-wide high-water mark of unsettled deliveries, updated by this session
   */
  public ConsumerSession(Channel channel, AtomicInteger peak) {
    this.channel = channel;
    this.peak = peak;
  }

  /**
   * The consuming channel.
   *
   * @return the channel
   */
  public Channel channel() {
    return channel;
  }

  /**
   * Whether settlements can still reach the broker.
   *
   * @return {@code true} while the channel is open
   */
  public boolean isOpen() {
    return channel.isOpen();
  }

  void delivered() {
    int now = unsettled.incrementAndGet();
    peak.accumulateAndGet(now, Math::max);
  }

  void settling() {
    unsettled.decrementAndGet();
  }

  /**
   * Deliveries received on this channel and not yet settled.
   *
   * @return the count
   */
  public int unsettled() {
    return unsettled.get();
  }
}
