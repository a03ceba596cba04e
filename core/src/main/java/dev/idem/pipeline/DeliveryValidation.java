package dev.idem.pipeline;

import dev.idem.DeadLetter;
import dev.idem.DeadLetterReason;
import dev.idem.Delivery;
import org.jspecify.annotations.Nullable;

/**
 * The first stage a delivery meets: bad input (a missing, over-long or malformed id, a missing
 * or undecodable payload, a delivery that cannot say what it is) becomes a {@link DeadLetter}
 * before any transaction starts.
 */
final class DeliveryValidation {

  private final String name;
  private final int maxIdLength;

  DeliveryValidation(ConsumerSettings<?> settings) {
    this.name = settings.name();
    this.maxIdLength = settings.maxIdLength();
  }

  /** Why the delivery is dead-lettered at once, or {@code null} when it is processable. */
  @Nullable
  DeadLetter validate(Delivery<?> delivery) {
    try {
      return check(delivery);
    } catch (RuntimeException | AssertionError | StackOverflowError e) {
      // The delivery could not say what it is (its id, payload or decoding state threw). Other
      // JVM errors (OutOfMemoryError, LinkageError) are not the message's: they propagate.
      return DeadLetter.of(DeadLetterReason.INVALID_ID, e, name, 0);
    }
  }

  private @Nullable DeadLetter check(Delivery<?> delivery) {
    String id = delivery.id();
    if (id == null || id.isBlank()) {
      return DeadLetter.rejected(DeadLetterReason.MISSING_ID, id == null ? "id is null" : "id is blank", name);
    }
    if (id.indexOf('\0') >= 0) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID, "id contains a NUL character, which PostgreSQL text cannot store",
          name);
    }
    if (id.length() > maxIdLength) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID,
          "id has " + id.length() + " characters, more than the maximum of " + maxIdLength, name);
    }
    int badSurrogate = unpairedSurrogate(id);
    if (badSurrogate >= 0) {
      return DeadLetter.rejected(DeadLetterReason.INVALID_ID, "id is not well-formed UTF-16: unpaired surrogate U+"
          + Integer.toHexString(id.charAt(badSurrogate)).toUpperCase(java.util.Locale.ROOT) + " at index " + badSurrogate
          + " (an id decoded from malformed bytes would collide with others)", name);
    }
    Throwable decodingFailure = delivery.decodingFailure();
    if (decodingFailure != null) {
      return DeadLetter.of(DeadLetterReason.UNDECODABLE_PAYLOAD, decodingFailure, name, 0);
    }
    if (delivery.payload() == null) {
      return DeadLetter.rejected(DeadLetterReason.MISSING_PAYLOAD, "payload is null", name);
    }
    return null;
  }

  /** The index of the first unpaired surrogate, or -1 when the string is well-formed UTF-16. */
  static int unpairedSurrogate(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          i++;
        } else {
          return i;
        }
      } else if (Character.isLowSurrogate(c)) {
        return i;
      }
    }
    return -1;
  }
}
