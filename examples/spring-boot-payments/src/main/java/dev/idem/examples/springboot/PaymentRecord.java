package dev.idem.examples.springboot;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

/**
 * One applied payment; deliberately without a unique key on the event id, so that a double
 * effect would show.
 *
 * @param id generated
 * @param eventId the payment's event id (the message id)
 * @param accountId the account credited
 * @param amountCents the amount in cents
 */
@Table("payments")
public record PaymentRecord(@Id Long id, String eventId, long accountId, long amountCents) {}
