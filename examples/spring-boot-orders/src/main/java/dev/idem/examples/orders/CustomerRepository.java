package dev.idem.examples.orders;

import org.springframework.data.r2dbc.repository.Modifying;
import org.springframework.data.r2dbc.repository.Query;
import org.springframework.data.repository.reactive.ReactiveCrudRepository;
import reactor.core.publisher.Mono;

/** Customers. */
public interface CustomerRepository extends ReactiveCrudRepository<Customer, Long> {

  /**
   * Counts an order in a customer's totals.
   *
   * @param id the customer
   * @param amountCents the order's amount
   * @return the rows updated: 1, or 0 for an unknown customer
   */
  @Modifying
  @Query("UPDATE customers SET orders = orders + 1, total_cents = total_cents + :amountCents WHERE id = :id")
  Mono<Integer> addOrder(long id, long amountCents);
}
