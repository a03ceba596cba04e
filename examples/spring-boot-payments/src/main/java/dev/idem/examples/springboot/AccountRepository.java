package dev.idem.examples.springboot;

import org.springframework.data.r2dbc.repository.Modifying;
import org.springframework.data.r2dbc.repository.Query;
import org.springframework.data.repository.reactive.ReactiveCrudRepository;
import reactor.core.publisher.Mono;

/** Accounts. */
public interface AccountRepository extends ReactiveCrudRepository<Account, Long> {

  /**
   * Adds to an account's balance.
   *
   * @param id the account
   * @param amountCents the amount
   * @return the rows updated: 1, or 0 for an unknown account
   */
  @Modifying
  @Query("UPDATE accounts SET balance = balance + :amountCents WHERE id = :id")
  Mono<Integer> credit(long id, long amountCents);
}
