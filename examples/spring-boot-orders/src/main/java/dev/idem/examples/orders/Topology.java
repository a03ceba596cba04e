package dev.idem.examples.orders;

import org.apache.kafka.clients.admin.NewTopic;
import org.springframework.amqp.core.AmqpAdmin;
import org.springframework.amqp.core.BindingBuilder;
import org.springframework.amqp.core.Declarables;
import org.springframework.amqp.core.DirectExchange;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.config.TopicBuilder;

/**
 * The topics and queues, declared by Spring Kafka's {@code KafkaAdmin} and Spring AMQP's
 * {@code RabbitAdmin} before the Idem consumers start (they start with the context's lifecycle,
 * after every singleton is ready).
 *
 * <p>RabbitMQ: the queue {@code <queue>} with the dead-letter exchange {@code <queue>.dlx} and
 * the queue {@code <queue>.dlq} bound to it with the routing key {@code <queue>}, the names the
 * Idem RabbitMQ source publishes dead letters to by default (as {@code RabbitTopology} declares
 * them). Kafka: the topic and its dead-letter topic {@code <topic>.DLT}.
 */
@Configuration(proxyBeanMethods = false)
public class Topology {

  /** Created by Spring. */
  public Topology() {}

  /**
   * The web shop's orders topic.
   *
   * @param topic {@code orders.kafka.topic}
   * @return the topic, created when absent
   */
  @Bean
  public NewTopic ordersTopic(@Value("${orders.kafka.topic}") String topic) {
    return TopicBuilder.name(topic).partitions(3).build();
  }

  /**
   * Its dead-letter topic.
   *
   * @param topic {@code orders.kafka.topic}
   * @return the topic, created when absent
   */
  @Bean
  public NewTopic ordersDeadLetterTopic(@Value("${orders.kafka.topic}") String topic) {
    return TopicBuilder.name(topic + ".DLT").partitions(1).build();
  }

  /**
   * The stores' orders queue and its dead-letter exchange and queue.
   *
   * @param queue {@code orders.rabbit.queue}
   * @return the declarables
   */
  @Bean
  public Declarables ordersQueue(@Value("${orders.rabbit.queue}") String queue) {
    DirectExchange deadLetters = new DirectExchange(queue + ".dlx");
    Queue deadLetterQueue = QueueBuilder.durable(queue + ".dlq").build();
    Queue orders = QueueBuilder.durable(queue).deadLetterExchange(deadLetters.getName()).deadLetterRoutingKey(queue).build();
    return new Declarables(deadLetters, deadLetterQueue, orders,
        BindingBuilder.bind(deadLetterQueue).to(deadLetters).with(queue));
  }

  /**
   * Declares the RabbitMQ topology once every singleton exists: Spring Boot's {@code RabbitAdmin}
   * otherwise waits for Spring AMQP's first connection, which may come after the Idem consumer
   * subscribed.
   *
   * @param admin Spring Boot's {@code AmqpAdmin}, a {@code RabbitAdmin}
   * @return the callback
   */
  @Bean
  public SmartInitializingSingleton declareRabbitTopology(AmqpAdmin admin) {
    return admin::initialize;
  }
}
