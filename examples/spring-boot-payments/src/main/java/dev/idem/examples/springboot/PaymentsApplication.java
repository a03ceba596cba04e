package dev.idem.examples.springboot;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * Payments on Kafka in a Spring Boot application. The consumer is declared in
 * {@code application.yml} ({@code idem.consumers.payments}); the effect is {@link PaymentHandler},
 * which credits the account and records the payment through Spring Data R2DBC repositories, in
 * the message's transaction. Needs PostgreSQL and Kafka (see {@code application.yml}).
 */
@SpringBootApplication
public class PaymentsApplication {

  /**
   * Runs the application.
   *
   * @param args Spring Boot arguments, for example {@code --spring.kafka.bootstrap-servers=host:9092}
   */
  public static void main(String[] args) {
    SpringApplication.run(PaymentsApplication.class, args);
  }
}
