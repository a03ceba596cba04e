package dev.idem.examples.orders;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

/**
 * One applied order; deliberately without a unique key on the order id, so that a double effect
 * would show.
 *
 * @param id generated
 * @param orderId the order's id
 * @param customerId the customer
 * @param amountCents the amount in cents
 */
@Table("shop_orders")
public record OrderRecord(@Id Long id, String orderId, long customerId, long amountCents) {}
