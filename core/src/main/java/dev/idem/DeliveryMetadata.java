package dev.idem;

import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/** {@link MessageMetadata} read from a {@link Delivery} on demand. */
record DeliveryMetadata(Delivery<?> delivery) implements MessageMetadata {

  @Override
  public String messageId() {
    return Objects.requireNonNull(delivery.id());
  }

  @Override
  public Map<String, String> headers() {
    Map<String, String> headers = delivery.headers();
    return headers == null ? Map.of() : headers;
  }

  @Override
  public Optional<String> key() {
    return Optional.ofNullable(delivery.key());
  }

  @Override
  public Optional<String> partition() {
    return Optional.ofNullable(delivery.partition());
  }

  @Override
  public Optional<Instant> timestamp() {
    return Optional.ofNullable(delivery.timestamp());
  }

  @Override
  public int deliveryAttempt() {
    return delivery.deliveryAttempt();
  }

  @Override
  public Map<String, String> broker() {
    Map<String, String> broker = delivery.brokerCoordinates();
    return broker == null ? Map.of() : broker;
  }

  @Override
  public String toString() {
    return "MessageMetadata[id=" + messageId() + ", partition=" + delivery.partition() + ", attempt=" + deliveryAttempt()
        + ", broker=" + broker() + "]";
  }
}
