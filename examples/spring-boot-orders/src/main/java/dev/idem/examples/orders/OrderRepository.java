package dev.idem.examples.orders;

import org.springframework.data.repository.reactive.ReactiveCrudRepository;

/** Applied orders. */
public interface OrderRepository extends ReactiveCrudRepository<OrderRecord, Long> {}
