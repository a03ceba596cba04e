package dev.idem.examples.springboot;

import org.springframework.data.repository.reactive.ReactiveCrudRepository;

/** Applied payments. */
public interface PaymentRepository extends ReactiveCrudRepository<PaymentRecord, Long> {}
