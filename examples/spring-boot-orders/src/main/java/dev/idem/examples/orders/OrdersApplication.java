package dev.idem.examples.orders;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * Orders from two channels in one Spring Boot 4 application: the web shop's on Kafka, the stores'
 * on RabbitMQ. Two Idem consumers, declared in {@code application.yml}
 * ({@code idem.consumers.web-orders} and {@code idem.consumers.store-orders}), apply each order once
 * through {@link OrderHandler}, which writes with Spring Data R2DBC repositories in the message's
 * transaction. {@link OrderPublisher} produces the input with Spring Kafka's {@code KafkaTemplate}
 * and Spring AMQP's {@code RabbitTemplate}; {@link Topology} declares the topics and queues. Needs
 * PostgreSQL, Kafka and RabbitMQ (see {@code application.yml}).
 */
@SpringBootApplication
public class OrdersApplication {

  /**
   * Runs the application.
   *
   * @param args Spring Boot arguments, for example {@code --spring.kafka.bootstrap-servers=host:9092}
   */
  public static void main(String[] args) {
    SpringApplication.run(OrdersApplication.class, args);
  }
}
