package dev.idem.examples.springboot;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

/**
 * An account and its balance.
 *
 * @param id the account id
 * @param balance the balance in cents
 */
@Table("accounts")
public record Account(@Id Long id, long balance) {}
