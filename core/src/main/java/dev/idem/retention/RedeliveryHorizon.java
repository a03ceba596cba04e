package dev.idem.retention;

import java.time.Duration;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * How long after a message was first delivered the broker may still deliver it again (the
 * redelivery horizon): {@link Retention} refuses to start with a window shorter than it, because
 * an id removed while its message can still come back would be applied twice. The Kafka adapter
 * reads topics' {@code retention.ms + segment.ms} ({@code KafkaRedeliveryHorizon}: Kafka deletes
 * whole segments, so a record can outlive {@code retention.ms} by up to {@code segment.ms}); the
 * RabbitMQ adapter uses a queue's message TTL ({@code RabbitRedeliveryHorizon}).
 */
@FunctionalInterface
public interface RedeliveryHorizon {

  /**
   * Reads the horizon from the broker.
   *
   * @return the horizon; an error when it cannot be read (then retention does not start)
   */
  Mono<Horizon> horizon();

  /** What a broker says about its redelivery horizon. */
  enum Kind {
    /** Messages can come back for at most {@link Horizon#duration()}. */
    BOUNDED,
    /** Messages can come back at any time (a topic kept forever or compacted): no window is long enough. */
    UNBOUNDED,
    /** The broker sets no bound that can be read; retention starts with a WARN. */
    UNKNOWN
  }

  /**
   * A broker's horizon.
   *
   * @param kind bounded, unbounded or unknown
   * @param duration the bound for {@link Kind#BOUNDED}, else {@code null}
   * @param source what it was read from, for messages, e.g.
   *     {@code topic 'payments' retention.ms=604800000 + segment.ms=604800000}
   */
  record Horizon(Kind kind, @Nullable Duration duration, String source) {

    /**
     * Checks that a bounded horizon has a duration.
     *
     * @param kind bounded, unbounded or unknown
     * @param duration the bound for {@link Kind#BOUNDED}, else {@code null}
     * @param source what it was read from, for messages, e.g.
     *     {@code topic 'payments' retention.ms=604800000 + segment.ms=604800000}
     */
    public Horizon {
      Objects.requireNonNull(kind, "kind");
      Objects.requireNonNull(source, "source");
      if (kind == Kind.BOUNDED && (duration == null || duration.isNegative())) {
        throw new IllegalArgumentException("a bounded horizon needs a duration of zero or more");
      }
    }

    /**
     * A bounded horizon.
     *
     * @param duration how long messages can come back
     * @param source where it was read
     * @return the horizon
     */
    public static Horizon bounded(Duration duration, String source) {
      return new Horizon(Kind.BOUNDED, duration, source);
    }

    /**
     * No bound: messages can come back at any time.
     *
     * @param source why
     * @return the horizon
     */
    public static Horizon unbounded(String source) {
      return new Horizon(Kind.UNBOUNDED, null, source);
    }

    /**
     * No readable bound.
     *
     * @param source why
     * @return the horizon
     */
    public static Horizon unknown(String source) {
      return new Horizon(Kind.UNKNOWN, null, source);
    }
  }
}
