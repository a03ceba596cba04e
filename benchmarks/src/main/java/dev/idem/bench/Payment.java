package dev.idem.bench;

import com.rabbitmq.client.AMQP;
import dev.idem.rabbit.PayloadDecoder;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * A payment event: an amount in cents credited to an account. The message id travels beside it
 * (Kafka header {@code message-id}, AMQP {@code message-id} property). The value is
 * {@code account:amountCents:publishedNanos} in UTF-8; {@code publishedNanos} is
 * {@link System#nanoTime()} when the publisher handed the message to the broker client, for the
 * latency mode (publisher and consumer share the benchmark's JVM).
 *
 * @param account the account credited
 * @param amountCents the amount
 * @param publishedNanos the publisher's {@code System.nanoTime()}, or 0
 */
record Payment(int account, long amountCents, long publishedNanos) {

  byte[] encode() {
    return (account + ":" + amountCents + ":" + publishedNanos).getBytes(StandardCharsets.US_ASCII);
  }

  static Payment decode(byte[] value) {
    String text = new String(value, StandardCharsets.US_ASCII);
    int first = text.indexOf(':');
    int second = text.indexOf(':', first + 1);
    if (first < 1 || second < 0) {
      throw new IllegalArgumentException("not a payment 'account:amountCents:publishedNanos': " + text);
    }
    return new Payment(Integer.parseInt(text, 0, first, 10), Long.parseLong(text, first + 1, second, 10),
        Long.parseLong(text, second + 1, text.length(), 10));
  }

  /** The Kafka source's value deserializer. */
  static final class KafkaDeserializer implements Deserializer<Payment> {
    @Override
    public Payment deserialize(String topic, byte[] data) {
      return decode(data);
    }
  }

  /** The RabbitMQ source's decoder. */
  static final class RabbitDecoder implements PayloadDecoder<Payment> {
    @Override
    public Payment decode(byte[] body, AMQP.BasicProperties properties) {
      return Payment.decode(body);
    }
  }
}
