package dev.idem.rabbit;

/**
 * Names of the headers that {@link DeadLetterMode#PUBLISH_WITH_CONFIRMS} puts on a dead letter and
 * that {@link RabbitDeadLetterReplayer} reads, and of the one every message the adapter publishes
 * carries ({@link #PUBLISH_SEQUENCE}). The message id travels unchanged in the AMQP
 * {@code message-id} property (and in any header the id came from).
 */
public final class RabbitHeaders {

  /** The {@link dev.idem.DeadLetterReason} name, e.g. {@code MISSING_ID}. */
  public static final String REASON = "x-idem-reason";
  /** A human-readable explanation. */
  public static final String DETAIL = "x-idem-detail";
  /** The class name of the error that caused it, when there was one. */
  public static final String ERROR_CLASS = "x-idem-error-class";
  /** The message of that error, when there was one (truncated to 1,000 characters). */
  public static final String ERROR_MESSAGE = "x-idem-error-message";
  /** The consumer name that gave up on the message. */
  public static final String CONSUMER = "x-idem-consumer";
  /** Processing attempts made in the last delivery (0 for bad input rejected up front). */
  public static final String ATTEMPTS = "x-idem-attempts";
  /** The broker's delivery attempt of the last delivery (1 for the first). */
  public static final String DELIVERY_ATTEMPT = "x-idem-delivery-attempt";
  /** The exchange the message was originally published to ({@code ""} for the default exchange). */
  public static final String ORIGINAL_EXCHANGE = "x-idem-original-exchange";
  /** The routing key the message was originally published with. */
  public static final String ORIGINAL_ROUTING_KEY = "x-idem-original-routing-key";
  /** The queue the message was consumed from. */
  public static final String ORIGINAL_QUEUE = "x-idem-original-queue";
  /** When it was dead-lettered, as ISO-8601 text. */
  public static final String DEAD_LETTERED_AT = "x-idem-dead-lettered-at";
  /** How often the message was replayed from a dead-letter queue. */
  public static final String REPLAY_COUNT = "x-idem-replay-count";
  /**
   * The publish sequence number of the channel that published the message, on every dead letter
   * and every {@link RabbitOutboxPublisher} message: a message the broker returns as unroutable
   * carries no other link to its publish. Means nothing to consumers; replay drops it.
   */
  public static final String PUBLISH_SEQUENCE = "x-idem-publish-seq";
  /** The quorum-queue delivery counter set by the broker. */
  public static final String X_DELIVERY_COUNT = "x-delivery-count";

  private RabbitHeaders() {}
}
