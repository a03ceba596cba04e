package dev.idem.bench;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import java.net.URI;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.springframework.amqp.core.MessageListener;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer;

/** A row on a queue of its own, filled with the whole workload before the row starts. */
final class RabbitFeed implements Feed {

  /** {@code basic.qos} of the blocking peers, and the most messages one "poll" of the per-poll peer takes. */
  static final int PEER_PREFETCH = 500;

  private final RabbitEnv rabbit;
  private final String queue;
  private final Duration stall;

  /** Declares the row's queue and publishes the workload to it, or none of it when {@code workload} is null. */
  RabbitFeed(RabbitEnv rabbit, String queue, Workload workload, Duration stall) throws Exception {
    this.rabbit = rabbit;
    this.queue = queue;
    this.stall = stall;
    rabbit.declare(queue);
    if (workload != null) {
      rabbit.publish(queue, workload);
    }
  }

  @FunctionalInterface
  private interface PollHandler {
    void handle(List<Delivery> deliveries, Channel channel) throws Exception;
  }

  /**
   * Consumes with manual acks and {@code basic.qos}; hands the loop what has arrived (one
   * message, or up to {@code batch} when more are waiting) until every message settled.
   */
  private void consumeLoop(Progress progress, int batch, PollHandler handler) throws Exception {
    try (Connection connection = RabbitEnv.factory(rabbit.uri()).newConnection("idem-bench-peer-" + queue)) {
      Channel channel = connection.createChannel();
      channel.basicQos(PEER_PREFETCH);
      BlockingQueue<Delivery> arrived = new LinkedBlockingQueue<>();
      channel.basicConsume(queue, false, (tag, delivery) -> arrived.add(delivery), tag -> {});
      long lastDelivery = System.nanoTime();
      List<Delivery> poll = new ArrayList<>(batch);
      while (!progress.isDone()) {
        Delivery first = arrived.poll(100, TimeUnit.MILLISECONDS);
        if (first == null) {
          if (System.nanoTime() - lastDelivery > stall.toNanos()) {
            throw new IllegalStateException(
                "stalled: " + progress.settled() + " messages settled, nothing delivered for " + stall.toSeconds() + " s");
          }
          continue;
        }
        lastDelivery = System.nanoTime();
        progress.received();
        poll.clear();
        poll.add(first);
        arrived.drainTo(poll, batch - 1);
        handler.handle(poll, channel);
      }
    }
  }

  @Override
  public void brokerOnly(Progress progress, Set<String> idsSeen) throws Exception {
    // What has arrived, acknowledged with one multiple ack per poll, as the per-poll loops do: the
    // broker's ceiling for a consumer on one channel.
    consumeLoop(progress, PEER_PREFETCH, (deliveries, channel) -> {
      for (Delivery d : deliveries) {
        Payment.decode(d.getBody());
        idsSeen.add(d.getProperties().getMessageId());
      }
      channel.basicAck(deliveries.get(deliveries.size() - 1).getEnvelope().getDeliveryTag(), true);
      for (int i = 0; i < deliveries.size(); i++) {
        progress.settledOne();
      }
    });
  }

  @Override
  public void jdbcPerMessage(Progress progress, Database db, Database.Tables tables) throws Exception {
    try (java.sql.Connection c = db.connect();
        PreparedStatement dedup = c
            .prepareStatement("INSERT INTO " + tables.inbox() + " (consumer, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING");
        PreparedStatement credit = c
            .prepareStatement("UPDATE " + tables.accounts() + " SET balance = balance + ? WHERE id = ?")) {
      c.setAutoCommit(false);
      consumeLoop(progress, 1, (deliveries, channel) -> {
        for (Delivery d : deliveries) {
          Payment payment = Payment.decode(d.getBody());
          dedup.setString(1, "jdbc");
          dedup.setString(2, d.getProperties().getMessageId());
          boolean fresh = dedup.executeUpdate() == 1;
          if (fresh) {
            credit.setLong(1, payment.amountCents());
            credit.setInt(2, payment.account());
            credit.executeUpdate();
          }
          c.commit();
          channel.basicAck(d.getEnvelope().getDeliveryTag(), false);
          progress.countEffect(fresh);
          progress.settledOne();
        }
      });
    }
  }

  @Override
  public void perPoll(Progress progress, PollWriter writer) throws Exception {
    consumeLoop(progress, PEER_PREFETCH, (deliveries, channel) -> {
      List<String> ids = new ArrayList<>(deliveries.size());
      List<Payment> payments = new ArrayList<>(deliveries.size());
      for (Delivery d : deliveries) {
        ids.add(d.getProperties().getMessageId());
        payments.add(Payment.decode(d.getBody()));
      }
      for (boolean applied : writer.write(ids, payments)) {
        progress.countEffect(applied);
      }
      // one channel, deliveries in tag order: acknowledges exactly this poll
      channel.basicAck(deliveries.get(deliveries.size() - 1).getEnvelope().getDeliveryTag(), true);
      for (Payment payment : payments) {
        progress.settledOne(payment.publishedNanos());
      }
    });
  }

  /**
   * Spring AMQP's {@code SimpleMessageListenerContainer} with its defaults (one consumer, prefetch
   * 250, {@code AcknowledgeMode.AUTO}: each message acked after its listener returned) until every
   * message settled.
   */
  @Override
  public void springPerRecord(Progress progress, SpringJdbc jdbc) throws Exception {
    CachingConnectionFactory connections = new CachingConnectionFactory(URI.create(rabbit.uri()));
    SimpleMessageListenerContainer container = new SimpleMessageListenerContainer(connections);
    container.setQueueNames(queue);
    container.setMessageListener((MessageListener) message -> {
      progress.received();
      progress.countEffect(jdbc.perRecord(message.getMessageProperties().getMessageId(), Payment.decode(message.getBody())));
      progress.settledOne();
    });
    container.start();
    try {
      progress.await(stall);
    } finally {
      container.stop();
      connections.destroy();
    }
  }

  @Override
  public Source idemSource(int prefetch) {
    // basic.qos twice the core's prefetch, as RabbitSourceOptions' default and the starter.
    RabbitSource<Payment> source = RabbitSource.create(RabbitSourceOptions.builder(queue)
        .uri(rabbit.uri())
        .prefetch(Math.min(2 * prefetch, RabbitSourceOptions.MAX_PREFETCH))
        .orderingKey((envelope,
            properties) -> properties.getHeaders() == null ? null : String.valueOf(properties.getHeaders().get("account")))
        .build(), new Payment.RabbitDecoder());
    return new Source(source.receive(), source::close, source::ackFrames);
  }

  @Override
  public String settledOnBroker() {
    return null;
  }

  @Override
  public String drainedAfterStop() throws Exception {
    return rabbit.awaitDrained(queue);
  }

  @Override
  public void close() {
    rabbit.delete(queue);
  }
}
