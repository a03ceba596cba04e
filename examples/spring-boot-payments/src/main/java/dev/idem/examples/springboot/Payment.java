package dev.idem.examples.springboot;

/**
 * A payment event, the JSON value of a record on the payments topic, for example
 * {@code {"accountId":3,"amountCents":1250}}. Its event id travels in the {@code message-id}
 * header and its key is the account id, so one account's payments keep their order.
 *
 * @param accountId the account credited
 * @param amountCents the amount in cents
 */
public record Payment(long accountId, long amountCents) {}
