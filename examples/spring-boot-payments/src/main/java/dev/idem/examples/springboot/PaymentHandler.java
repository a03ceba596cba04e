package dev.idem.examples.springboot;

import dev.idem.Handler;
import dev.idem.NonRetryableException;
import dev.idem.Tx;
import org.reactivestreams.Publisher;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * The business effect, named by {@code idem.consumers.payments.handler}: credit the account and
 * record the payment. Both repositories join the message's transaction (the starter runs it on
 * Spring's {@code TransactionalOperator}), so both writes commit with the dedup row or not at all.
 * An unknown account can never succeed: it is dead-lettered at once.
 */
@Component("paymentHandler")
public class PaymentHandler implements Handler<Payment> {

  private final AccountRepository accounts;
  private final PaymentRepository payments;

  /**
   * Creates the handler.
   *
   * @param accounts the accounts
   * @param payments the applied payments
   */
  public PaymentHandler(AccountRepository accounts, PaymentRepository payments) {
    this.accounts = accounts;
    this.payments = payments;
  }

  // tag::handle[] (quoted in docs/spring-boot.md)
  @Override
  public Publisher<?> handle(Payment payment, Tx tx) {
    return accounts.credit(payment.accountId(), payment.amountCents())
        .flatMap(updated -> updated == 1
            ? payments.save(new PaymentRecord(null, tx.messageId(), payment.accountId(), payment.amountCents()))
            : Mono.error(new NonRetryableException("unknown account " + payment.accountId())));
  }
  // end::handle[]
}
