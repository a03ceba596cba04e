package dev.idem.rabbit.internal;

import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Computes {@link dev.idem.Delivery#deliveryAttempt()} from what RabbitMQ tells a consumer: the
 * {@code redelivered} flag (classic and quorum queues) and, on quorum queues, the
 * {@code x-delivery-count} header, which counts the earlier deliveries.
 */
public final class DeliveryAttempts {

  private DeliveryAttempts() {}

  /**
   * The attempt of a delivery.
   *
   * @param redelivered the envelope's redelivered flag
   * @param headers the message headers, may be {@code null}
   * @return 1 for a first delivery; {@code x-delivery-count + 1} when the header holds a
   *     non-negative number; otherwise 2 for a redelivery (the broker says only "at least once
   *     before")
   */
  public static int of(boolean redelivered, @Nullable Map<String, Object> headers) {
    int fromFlag = redelivered ? 2 : 1;
    Object count = headers == null ? null : headers.get("x-delivery-count");
    long previous = -1;
    if (count instanceof Number number) {
      previous = number.longValue();
    } else if (count != null) {
      try {
        previous = Long.parseLong(Objects.requireNonNull(HeaderValues.render(count), "the text of a value").trim());
      } catch (NumberFormatException e) {
        previous = -1;
      }
    }
    if (previous < 0) {
      return fromFlag;
    }
    int attempt = previous >= Integer.MAX_VALUE - 1L ? Integer.MAX_VALUE : (int) previous + 1;
    return Math.max(fromFlag, attempt);
  }
}
