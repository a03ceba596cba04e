package dev.idem.docs;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * The payment event of the guides: an account and an amount in cents, sent as the text
 * {@code "<account>,<amountCents>"}.
 *
 * @param accountId the account to credit
 * @param amountCents the amount in cents
 */
// tag::payment[]
public record Payment(long accountId, long amountCents) {

  /**
   * Reads {@code "<account>,<amountCents>"}.
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

  /**
   * The Kafka value deserializer. What it throws makes the record an
   * {@code UNDECODABLE_PAYLOAD} dead letter; the stream goes on.
   */
  public static final class KafkaDeserializer implements Deserializer<Payment> {

    /** Creates the deserializer. */
    public KafkaDeserializer() {}

    @Override
    public Payment deserialize(String topic, byte[] data) {
      return parse(new String(data, StandardCharsets.UTF_8));
    }
  }
}
// end::payment[]
