package dev.idem.kafka.internal;

import java.lang.reflect.Method;
import java.util.Optional;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.jspecify.annotations.Nullable;

/**
 * What the kafka-clients jar on the class path offers a share-group source: the share consumer
 * with explicit acknowledgement ({@code share.acknowledgement.mode}, kafka-clients 4.1 and later),
 * the records' delivery count (4.1), the acquisition lock the broker reported and lock renewal (4.2).
 * Idem is built against the client Spring Boot 4.0 manages (4.1) and compiles on 3.9, so the
 * parts newer than 3.9 are looked up, not linked.
 */
final class ShareClients {

  /** The oldest kafka-clients whose share consumer Idem reads. */
  static final String MINIMUM_VERSION = "4.1";

  private static final @Nullable Method LOCK_TIMEOUT = method("org.apache.kafka.clients.consumer.ShareConsumer",
      "acquisitionLockTimeoutMs");
  private static final @Nullable Method DELIVERY_COUNT = method("org.apache.kafka.clients.consumer.ConsumerRecord",
      "deliveryCount");
  private static final @Nullable AcknowledgeType RENEW = renewType();

  private ShareClients() {}

  /**
   * Fails unless the share consumer with explicit acknowledgement is on the class path.
   *
   * @param group the share group, for the message
   * @throws IllegalStateException naming the version found and the version needed
   */
  static void require(String group) {
    String version = ClientsVersion.current();
    boolean present;
    try {
      Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer", false, ShareClients.class.getClassLoader());
      present = true;
    } catch (ClassNotFoundException | LinkageError e) {
      present = false;
    }
    if (!present || olderThan(version, 4, 1)) {
      throw new IllegalStateException("Kafka share source '" + group + "' needs kafka-clients " + MINIMUM_VERSION
          + " or later (its KafkaShareConsumer with share.acknowledgement.mode=explicit; share groups are production-ready"
          + " with 4.2 clients and brokers), but kafka-clients " + version + " is on the class path");
    }
  }

  /** Whether {@code version} (for example {@code 3.9.1}) is older than {@code major.minor}; an unreadable one is not. */
  static boolean olderThan(String version, int major, int minor) {
    String[] parts = version.split("[.-]");
    try {
      int found = Integer.parseInt(parts[0]);
      int foundMinor = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
      return found < major || found == major && foundMinor < minor;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /**
   * The acquisition lock the broker reported to this consumer (kafka-clients 4.2+, after a poll).
   *
   * @param consumer the share consumer
   * @return the lock in milliseconds, empty when unknown
   */
  static Optional<Integer> acquisitionLockTimeoutMs(Object consumer) {
    if (LOCK_TIMEOUT == null) {
      return Optional.empty();
    }
    try {
      Object value = LOCK_TIMEOUT.invoke(consumer);
      return value instanceof Optional<?> optional && optional.orElse(null) instanceof Integer ms
          ? Optional.of(ms)
          : Optional.empty();
    } catch (ReflectiveOperationException | RuntimeException e) {
      return Optional.empty();
    }
  }

  /**
   * The broker's delivery count of a share group's record (kafka-clients 4.1+).
   *
   * @param record the record
   * @return the count, at least 1; 1 when unknown
   */
  static int deliveryCount(Object record) {
    if (DELIVERY_COUNT == null) {
      return 1;
    }
    try {
      Object value = DELIVERY_COUNT.invoke(record);
      return value instanceof Optional<?> optional && optional.orElse(null) instanceof Short count ? Math.max(1, (int) count) : 1;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return 1;
    }
  }

  /**
   * {@code AcknowledgeType.RENEW} (KIP-1222, kafka-clients 4.2 and later): extends a record's
   * acquisition lock by the group's lock duration.
   *
   * @return the type, empty on older clients
   */
  static Optional<AcknowledgeType> renew() {
    return Optional.ofNullable(RENEW);
  }

  private static @Nullable AcknowledgeType renewType() {
    for (AcknowledgeType type : AcknowledgeType.values()) {
      if (type.name().equals("RENEW")) {
        return type;
      }
    }
    return null;
  }

  private static @Nullable Method method(String type, String name) {
    try {
      return Class.forName(type).getMethod(name);
    } catch (ReflectiveOperationException | LinkageError e) {
      return null;
    }
  }
}
