package dev.idem.test;

/**
 * The hostile schedules {@link HandlerContract} replays a handler under, in the order it runs
 * them. Each compares the probe of the business state with the clean run's.
 */
public enum Schedule {

  /** The messages once each, one at a time, with a fresh consumer: the reference, run twice. */
  CLEAN_RUN("the messages once each, one at a time (run twice: the reference)"),

  /** The id rule applied to a first delivery and to a redelivery of every message. */
  MESSAGE_ID_STABILITY("the message-id rule on a delivery and a redelivery of each message"),

  /** The clean run again, with a new handler instance for every message. */
  FRESH_HANDLER_PER_MESSAGE("the messages once each, a new handler instance for each"),

  /**
   * For every message and every statement its handler runs: an attempt that fails right after
   * that statement (rolled back, dead-lettered), then the message again, which must succeed.
   */
  FAILURE_AFTER_EACH_STATEMENT("a failure injected after each statement of each message, then the message again"),

  /**
   * Every message redelivered right after its commit (the acknowledgement was lost), then all of
   * them again to a restarted consumer of the same name.
   */
  REDELIVERY_AFTER_COMMIT("each message redelivered after its commit, then all again after a restart"),

  /**
   * Batch mode: every message twice in one burst (duplicates inside a batch), then the whole
   * burst again (duplicates across batches).
   */
  DUPLICATES_IN_AND_ACROSS_BATCHES("each message twice in one burst, then the burst again, in batch mode"),

  /** All messages at once on several lanes, in batch mode. */
  CONCURRENT_LANES_BATCH("all messages at once on 4 lanes, batch mode"),

  /** All messages at once on several lanes, one transaction per message. */
  CONCURRENT_LANES_PER_MESSAGE("all messages at once on 4 lanes, one transaction per message"),

  /**
   * Batch mode: the pipeline is cancelled after half of the messages settled (transactions in
   * flight roll back, nothing else is acknowledged), then a fresh consumer of the same name with
   * a new handler instance receives every message again, as after a crash.
   */
  STOP_MID_BATCH("a stop after half of the messages settled, then every message to a fresh consumer");

  private final String description;

  Schedule(String description) {
    this.description = description;
  }

  /**
   * What the schedule does, one line.
   *
   * @return the description
   */
  public String description() {
    return description;
  }
}
