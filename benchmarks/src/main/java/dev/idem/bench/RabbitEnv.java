package dev.idem.bench;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.rabbit.RabbitTopology;
import java.time.Duration;
import java.util.Map;

/** The RabbitMQ side: one connection for declaring, publishing and the checks. */
final class RabbitEnv implements AutoCloseable {

  private final String uri;
  private final boolean quorum;
  private final Connection connection;

  RabbitEnv(String uri, boolean quorum) throws Exception {
    this.uri = uri;
    this.quorum = quorum;
    this.connection = factory(uri).newConnection("idem-bench-admin");
  }

  static ConnectionFactory factory(String uri) throws Exception {
    ConnectionFactory factory = new ConnectionFactory();
    factory.setUri(uri);
    factory.setAutomaticRecoveryEnabled(false);
    return factory;
  }

  String uri() {
    return uri;
  }

  String version() {
    Object version = connection.getServerProperties().get("version");
    return "RabbitMQ " + version + (quorum ? ", quorum queues" : ", classic durable queues") + ", persistent messages";
  }

  /** Declares the queue with its dead-letter exchange and queue (as Idem's topology does). */
  void declare(String queue) throws Exception {
    RabbitTopology.declare(connection, queue, quorum ? RabbitTopology.QueueType.QUORUM : RabbitTopology.QueueType.CLASSIC);
  }

  void delete(String queue) {
    try {
      RabbitTopology.delete(connection, queue);
    } catch (Exception e) {
      System.err.println("could not delete queue " + queue + ": " + e);
    }
  }

  static AMQP.BasicProperties properties(Workload workload, int event) {
    return new AMQP.BasicProperties.Builder()
        .messageId(Workload.id(event))
        .deliveryMode(2)
        .headers(Map.of("account", Integer.toString(workload.account(event))))
        .build();
  }

  /** Publishes the whole workload in order with publisher confirms, and waits until the queue holds all of it. */
  void publish(String queue, Workload workload) throws Exception {
    try (Channel channel = connection.createChannel()) {
      channel.confirmSelect();
      for (int i = 0; i < workload.total(); i++) {
        int event = workload.eventAt(i);
        channel.basicPublish("", queue, properties(workload, event), workload.payment(event, 0).encode());
        if (i % 5_000 == 4_999) {
          channel.waitForConfirmsOrDie(60_000);
        }
      }
      channel.waitForConfirmsOrDie(60_000);
    }
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    long ready;
    while ((ready = ready(queue)) != workload.total()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(queue + " holds " + ready + " messages, expected " + workload.total());
      }
      Thread.sleep(50);
    }
  }

  /** Messages ready in the queue (not counting those delivered and unacknowledged). */
  long ready(String queue) throws Exception {
    try (Channel channel = connection.createChannel()) {
      return channel.queueDeclarePassive(queue).getMessageCount();
    }
  }

  long consumers(String queue) throws Exception {
    try (Channel channel = connection.createChannel()) {
      return channel.queueDeclarePassive(queue).getConsumerCount();
    }
  }

  /**
   * After the consumer is gone: whether the queue is empty (its unacknowledged messages would be
   * back in it), waiting up to 10 s for the broker to see the consumer leave.
   */
  String awaitDrained(String queue) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    long ready;
    long consumers;
    do {
      ready = ready(queue);
      consumers = consumers(queue);
      if (ready == 0 && consumers == 0) {
        return null;
      }
      Thread.sleep(100);
    } while (System.nanoTime() < deadline);
    return ready + " messages left in " + queue + " (" + consumers + " consumers)";
  }

  Connection connection() {
    return connection;
  }

  @Override
  public void close() throws java.io.IOException {
    connection.close();
  }
}
