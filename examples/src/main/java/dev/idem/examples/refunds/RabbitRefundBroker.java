package dev.idem.examples.refunds;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.idem.Delivery;
import dev.idem.examples.DemoEnvironment;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitOutboxPublisher;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Flux;

/** The refund example on RabbitMQ: a refunds queue and a notifications queue, each with its dead-letter queue. */
final class RabbitRefundBroker implements RefundBroker {

  private final String uri;
  private final String refundsQueue;
  private final String notificationsQueue;
  private final List<AutoCloseable> resources = new ArrayList<>();

  RabbitRefundBroker(String uri, String run) {
    this.uri = uri;
    this.refundsQueue = "idem-demo-refunds-" + run;
    this.notificationsQueue = "idem-demo-notifications-" + run;
    withConnection("idem-refunds-example-setup", connection -> {
      RabbitTopology.declare(connection, refundsQueue, RabbitTopology.QueueType.CLASSIC);
      RabbitTopology.declare(connection, notificationsQueue, RabbitTopology.QueueType.CLASSIC);
    });
  }

  @Override
  public void publishRefunds(List<RefundEvent> events) {
    withConnection("idem-refunds-example-publisher", connection -> {
      try (Channel channel = connection.createChannel()) {
        channel.confirmSelect();
        for (RefundEvent event : events) {
          AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId(event.refundId()).deliveryMode(2).build();
          channel.basicPublish("", refundsQueue, props, Long.toString(event.amountCents()).getBytes(StandardCharsets.UTF_8));
        }
        channel.waitForConfirmsOrDie(30_000);
      }
    });
  }

  @Override
  public Flux<Delivery<String>> refunds() {
    return source(refundsQueue);
  }

  @Override
  public String notificationsDestination() {
    return notificationsQueue;
  }

  @Override
  public OutboxPublisher publisher() {
    RabbitOutboxPublisher publisher = RabbitOutboxPublisher.create(uri);
    resources.add(publisher);
    return publisher;
  }

  @Override
  public Flux<Delivery<String>> notifications() {
    return source(notificationsQueue);
  }

  private Flux<Delivery<String>> source(String queue) {
    RabbitSource<String> source = RabbitSource.create(RabbitSourceOptions.builder(queue).uri(uri).prefetch(32).build(),
        PayloadDecoder.utf8());
    resources.add(source);
    return source.receive();
  }

  @Override
  public void close() {
    for (AutoCloseable resource : resources) {
      try {
        resource.close();
      } catch (Exception e) {
        System.err.println("[refunds] closing " + resource + " failed: " + e);
      }
    }
    withConnection("idem-refunds-example-cleanup", connection -> {
      RabbitTopology.delete(connection, refundsQueue);
      RabbitTopology.delete(connection, notificationsQueue);
    });
  }

  private interface ConnectionWork {
    void run(Connection connection) throws Exception;
  }

  private void withConnection(String name, ConnectionWork work) {
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(uri);
      try (Connection connection = factory.newConnection(name)) {
        work.run(connection);
      }
    } catch (Exception e) {
      throw new IllegalStateException("RabbitMQ at " + DemoEnvironment.hostAndPort(uri) + " failed (" + name + "): " + e, e);
    }
  }
}
