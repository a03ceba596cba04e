package dev.idem.kafka;

/**
 * Names of the headers the Kafka adapter adds to a dead-letter record. Every value is a UTF-8
 * string. A dead-letter record also keeps the original key, value bytes and headers, and carries
 * the message id in the consumer's id header (default {@value KafkaSourceOptions#DEFAULT_MESSAGE_ID_HEADER}),
 * so that {@link KafkaDeadLetterReplayer} can republish it under the same id.
 */
public final class DeadLetterHeaders {

  /** Prefix shared by every dead-letter header: {@value}. Replay strips headers with it. */
  public static final String PREFIX = "idem-dlt-";
  /** The topic the record was consumed from: {@value}. */
  public static final String ORIGINAL_TOPIC = PREFIX + "original-topic";
  /** The partition it was consumed from: {@value}. */
  public static final String ORIGINAL_PARTITION = PREFIX + "original-partition";
  /** Its offset in that partition: {@value}. */
  public static final String ORIGINAL_OFFSET = PREFIX + "original-offset";
  /**
   * The message id the consumer used: {@value}. Absent when the record had no valid id; an id
   * header that was not UTF-8 or repeated with different values is then kept byte for byte.
   */
  public static final String MESSAGE_ID = PREFIX + "message-id";
  /** The consumer name that gave up on it: {@value}. */
  public static final String CONSUMER = PREFIX + "consumer";
  /** The {@link dev.idem.DeadLetterReason} name: {@value}. */
  public static final String REASON = PREFIX + "reason";
  /** A human-readable explanation: {@value}. */
  public static final String DETAIL = PREFIX + "detail";
  /** The class of the error that caused it, when there was one: {@value}. */
  public static final String ERROR_CLASS = PREFIX + "error-class";
  /** The message of that error, when there was one: {@value}. */
  public static final String ERROR_MESSAGE = PREFIX + "error-message";
  /** Processing attempts made before giving up (0 for rejected input): {@value}. */
  public static final String ATTEMPTS = PREFIX + "attempts";

  private DeadLetterHeaders() {}
}
