package dev.idem.examples.orders;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

/**
 * A customer and what they ordered.
 *
 * @param id the customer id
 * @param orders how many orders
 * @param totalCents their total in cents
 */
@Table("customers")
public record Customer(@Id Long id, long orders, long totalCents) {}
