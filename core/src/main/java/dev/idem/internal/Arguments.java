package dev.idem.internal;

import java.time.Duration;
import java.util.Objects;

/** Checks of builder arguments, each naming the setting in its error. */
public final class Arguments {

  private Arguments() {}

  /**
   * A value that is not blank.
   *
   * @param value the value
   * @param name the setting's name, for the error
   * @return {@code value}
   * @throws NullPointerException naming the setting when {@code value} is null
   * @throws IllegalArgumentException naming the setting when {@code value} is blank
   */
  public static String requireText(String value, String name) {
    Objects.requireNonNull(value, name);
    if (value.isBlank()) {
      throw new IllegalArgumentException(name + " must not be blank");
    }
    return value;
  }

  /**
   * A duration above zero.
   *
   * @param duration the duration
   * @param name the setting's name, for the error
   * @return {@code duration}
   * @throws NullPointerException naming the setting when {@code duration} is null
   * @throws IllegalArgumentException naming the setting and the value when it is zero or negative
   */
  public static Duration requirePositive(Duration duration, String name) {
    Objects.requireNonNull(duration, name);
    if (duration.isNegative() || duration.isZero()) {
      throw new IllegalArgumentException(name + " must be positive, was " + duration);
    }
    return duration;
  }
}
