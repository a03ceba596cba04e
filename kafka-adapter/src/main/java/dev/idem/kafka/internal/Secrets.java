package dev.idem.kafka.internal;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/** Masks secret values of client properties for {@code toString()} and logs. */
public final class Secrets {

  private static final String[] SECRET_MARKERS = {"password", "secret", "jaas", "token", "credential", "ssl.keystore.key",
      "user.info"};

  private Secrets() {}

  /**
   * A copy with the values of secret-looking keys replaced by {@code ******}.
   *
   * @param properties client properties
   * @return the masked copy
   */
  public static Map<String, Object> mask(Map<String, Object> properties) {
    Map<String, Object> masked = new LinkedHashMap<>();
    properties.forEach((key, value) -> masked.put(key, isSecret(key) ? "******" : value));
    return masked;
  }

  static boolean isSecret(String key) {
    String k = key.toLowerCase(Locale.ROOT);
    for (String marker : SECRET_MARKERS) {
      if (k.contains(marker)) {
        return true;
      }
    }
    return false;
  }
}
