package dev.idem.examples.payments;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;

/**
 * A payment applied to an account. The event id travels in the {@code message-id} header; the
 * value is {@code accountId:amountCents} in UTF-8 and the record key is the account id, so one
 * account's payments share a partition and {@code Ordering.BY_KEY} applies them in order.
 *
 * @param eventId the producer's event id, the dedup key
 * @param accountId the account credited
 * @param amountCents the amount in cents
 */
public record PaymentEvent(String eventId, int accountId, long amountCents) {

  /**
   * The record value.
   *
   * @return the encoded value
   */
  public byte[] encodeValue() {
    return (accountId + ":" + amountCents).getBytes(StandardCharsets.UTF_8);
  }

  /** Decodes values; a malformed value throws, which the Kafka source turns into a poison pill. */
  public static final class ValueDeserializer implements Deserializer<PaymentEvent> {
    @Override
    public void configure(Map<String, ?> configs, boolean isKey) {}

    @Override
    public PaymentEvent deserialize(String topic, byte[] data) {
      String text = new String(data, StandardCharsets.UTF_8);
      int colon = text.indexOf(':');
      if (colon < 1) {
        throw new IllegalArgumentException("not a payment 'accountId:amountCents': '" + text + "'");
      }
      try {
        // The event id is the delivery's id, not part of the value.
        return new PaymentEvent(null, Integer.parseInt(text.substring(0, colon)), Long.parseLong(text.substring(colon + 1)));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("not a payment 'accountId:amountCents': '" + text + "'", e);
      }
    }
  }

  /** Encodes values. */
  public static final class ValueSerializer implements Serializer<PaymentEvent> {
    @Override
    public byte[] serialize(String topic, PaymentEvent event) {
      return event.encodeValue();
    }
  }
}
