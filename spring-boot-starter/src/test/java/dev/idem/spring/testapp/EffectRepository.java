package dev.idem.spring.testapp;

import org.springframework.data.repository.reactive.ReactiveCrudRepository;

/** The repository a handler uses. */
public interface EffectRepository extends ReactiveCrudRepository<Effect, Long> {}
