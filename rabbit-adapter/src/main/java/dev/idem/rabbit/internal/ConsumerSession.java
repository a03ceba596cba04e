package dev.idem.rabbit.internal;

import com.rabbitmq.client.Channel;
import java.util.Iterator;
import java.util.NavigableSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One channel's consumer: the channel that delivered (and must settle) its messages, and how many
 * of them are not settled yet. Each delivery is counted once when it arrives and released once
 * (see {@link RabbitDelivery#release()}), whatever the number of settlement attempts, so the
 * count never goes below zero; an ack that fails on an open channel counts its delivery again.
 * It also knows the delivery tags its channel received and the broker still counts as
 * outstanding, so that acks can be coalesced ({@link AckCoalescer}).
 */
public final class ConsumerSession {

  private final Channel channel;
  private final AtomicInteger unsettled = new AtomicInteger();
  private final AtomicInteger peak;
  /** Tags delivered on the channel and not yet settled with the broker; at most the channel's prefetch. */
  private final NavigableSet<Long> outstanding = new ConcurrentSkipListSet<>();

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

  /** A delivery arrived on the channel: counted as unsettled, its tag outstanding. Before anything else reads it. */
  void arrived(long tag) {
    outstanding.add(tag);
    delivered();
  }

  /** The broker was told that the delivery of {@code tag} is settled (acknowledged or rejected). */
  void settled(long tag) {
    outstanding.remove(tag);
  }

  /** The tags the broker still counts as outstanding on this channel, ascending. */
  Iterator<Long> outstandingTags() {
    return outstanding.iterator();
  }

  void delivered() {
    int now = unsettled.incrementAndGet();
    peak.accumulateAndGet(now, Math::max);
  }

  /** One delivery of this channel left the unsettled set: acknowledged, rejected, or lost with the channel. */
  void released() {
    unsettled.decrementAndGet();
  }

  /**
   * Deliveries received on this channel and not yet settled.
   *
   * @return the count; 0 once the channel is closed (the broker took its deliveries back)
   */
  public int unsettled() {
    return channel.isOpen() ? unsettled.get() : 0;
  }
}
