package dev.idem.spring;

import java.time.Duration;
import java.util.Objects;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * The health of one consumer:
 * <ul>
 *   <li>DOWN when its stream ended by itself (the source failed for good, or completed), with the
 *       error;</li>
 *   <li>DOWN when it keeps failing: {@code maxFailuresInARow} failures (attempts that failed on
 *       infrastructure such as an unreachable database, settlements the broker adapter could not
 *       complete) without a message settled in between;</li>
 *   <li>DOWN when its oldest unsettled message is older than {@code maxOldestUnsettledAge} (a
 *       stuck message or a backlog it does not keep up with);</li>
 *   <li>OUT_OF_SERVICE while stopping or stopped, UNKNOWN before it started;</li>
 *   <li>UP otherwise.</li>
 * </ul>
 * Details: {@code state}, {@code unsettled}, {@code oldestUnsettledAge} (ISO-8601),
 * {@code failuresInARow}, and the last failure when there is one.
 */
public final class IdemHealthIndicator implements HealthIndicator {

  private final ManagedConsumer consumer;

  /**
   * Creates the indicator of a consumer.
   *
   * @param consumer the consumer
   */
  public IdemHealthIndicator(ManagedConsumer consumer) {
    this.consumer = Objects.requireNonNull(consumer, "consumer");
  }

  @Override
  public Health health() {
    Duration age = consumer.oldestUnsettledAge();
    int failures = consumer.failuresInARow();
    IdemConsumerDefinition<?> definition = consumer.definition();
    Health.Builder builder = switch (consumer.state()) {
      case NOT_STARTED -> Health.unknown();
      case STOPPING, STOPPED -> Health.outOfService();
      case FAILED -> Health.down().withDetail("error", String.valueOf(consumer.failure()));
      case RUNNING -> {
        if (failures >= definition.maxFailuresInARow()) {
          yield Health.down().withDetail("reason",
              failures + " failures in a row (at most " + definition.maxFailuresInARow() + ")");
        }
        if (age.compareTo(definition.maxOldestUnsettledAge()) > 0) {
          yield Health.down().withDetail("reason", "the oldest unsettled message is " + age + " old (at most "
              + definition.maxOldestUnsettledAge() + ")");
        }
        yield Health.up();
      }
    };
    builder.withDetail("state", consumer.state().name())
        .withDetail("unsettled", consumer.unsettled())
        .withDetail("oldestUnsettledAge", age.toString())
        .withDetail("failuresInARow", failures);
    if (consumer.lastFailure() != null) {
      builder.withDetail("lastFailure", String.valueOf(consumer.lastFailure()));
    }
    return builder.build();
  }
}
