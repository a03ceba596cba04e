package com.example.payments;

/**
 * A payment event: an account and an amount in cents, sent as the text
 * {@code "<account>,<amountCents>"}.
 *
 * @param accountId the account to credit
 * @param amountCents the amount in cents
 */
public record Payment(long accountId, long amountCents) {

  /**
   * Reads {@code "<account>,<amountCents>"}; what it throws makes the message an
   * {@code UNDECODABLE_PAYLOAD} dead letter.
   *
   * @param text the message body
   * @return the payment
   * @throws IllegalArgumentException when the text is not two numbers separated by a comma
   */
  public static Payment parse(String text) {
    String[] parts = text.trim().split(",");
    if (parts.length != 2) {
      throw new IllegalArgumentException("expected <account>,<amountCents>, got " + text);
    }
    return new Payment(Long.parseLong(parts[0].trim()), Long.parseLong(parts[1].trim()));
  }
}
