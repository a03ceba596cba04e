package dev.idem.examples.orders;

import dev.idem.Handler;
import dev.idem.NonRetryableException;
import dev.idem.Tx;
import org.reactivestreams.Publisher;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * The business effect of both consumers ({@code idem.consumers.*.handler: orderHandler}): count the
 * order in the customer's totals and record it. Both repositories join the message's transaction
 * (the starter runs it on Spring's {@code TransactionalOperator}), so both writes commit with the
 * dedup row or not at all. An unknown customer can never succeed: the order is dead-lettered at
 * once (Kafka: the dead-letter topic; RabbitMQ: the dead-letter queue).
 */
@Component("orderHandler")
public class OrderHandler implements Handler<Order> {

  private final CustomerRepository customers;
  private final OrderRepository orders;

  /**
   * Creates the handler.
   *
   * @param customers the customers
   * @param orders the applied orders
   */
  public OrderHandler(CustomerRepository customers, OrderRepository orders) {
    this.customers = customers;
    this.orders = orders;
  }

  @Override
  public Publisher<?> handle(Order order, Tx tx) {
    return customers.addOrder(order.customerId(), order.amountCents())
        .flatMap(updated -> updated == 1
            ? orders.save(new OrderRecord(null, order.orderId(), order.customerId(), order.amountCents()))
            : Mono.error(new NonRetryableException("unknown customer " + order.customerId())));
  }
}
