package dev.idem.test;

/**
 * The mistakes that break exactly-once in a handler, as {@link HandlerContract} names them in a
 * {@link Finding}. Each constant's {@link #advice()} says what to change.
 */
public enum Mistake {

  /**
   * An effect survived a rolled-back attempt: it was written on another connection (a second
   * pool, a repository outside the transaction, autocommit), not through the {@code Tx} the
   * handler was given. After a crash or a retry it is applied twice.
   */
  EFFECT_OUTSIDE_TRANSACTION("an effect survived a rollback: write it through the Tx the handler is given "
      + "(tx.sql(...), or tx.connection() for a library), never on another connection or pool"),

  /**
   * The user's fake of an outside system (HTTP, e-mail, another broker) was called during an
   * attempt that rolled back: the outside world saw an effect for a message that is then
   * processed again.
   */
  SIDE_EFFECT_OUTSIDE_OUTBOX("an outside system was called from an attempt that rolled back: write an outbox "
      + "row in the transaction (tx.outbox(...)) and let the OutboxRelay call it after the commit"),

  /**
   * The handler remembers something between messages or attempts (a counter, a cache, a "seen"
   * set): a fresh instance, or the retry after a rollback, writes something else than the clean
   * run did. Memory is lost in a crash and is not rolled back with the transaction.
   */
  STATE_KEPT_IN_MEMORY("the handler's result depends on what it remembers in memory between messages or "
      + "attempts: read the state it needs from the database inside the transaction"),

  /**
   * The message-id rule gave another id to a redelivery of the same message (a random UUID, the
   * delivery attempt, a receive timestamp): duplicates are then processed as new messages.
   */
  UNSTABLE_MESSAGE_ID("the message-id rule gives a redelivered message another id: derive the id from what "
      + "the producer set (an event id, a business key), never from the delivery"),

  /**
   * Two clean runs of the same messages left different effects: the probe reads something that
   * changes from run to run (a timestamp, a sequence value), or the handler is not deterministic.
   * The runner cannot compare schedules until the probe reads only the business state.
   */
  PROBE_NOT_REPEATABLE("two clean runs of the same messages gave different probe results: probe only "
      + "business state (not now(), sequence ids or ctid) and make reset restore the same starting state"),

  /**
   * The effects under a hostile schedule differ from the clean run's for another reason: for
   * example an effect that depends on the order of messages of different keys (give them the
   * same ordering key), or a read-modify-write that concurrent keys race on.
   */
  EFFECTS_DIVERGED("the effects under this schedule differ from the clean run's: look for a read-modify-write "
      + "that several keys race on, or an effect that depends on the order of messages with different keys");

  private final String advice;

  Mistake(String advice) {
    this.advice = advice;
  }

  /**
   * What to change, one sentence.
   *
   * @return the advice
   */
  public String advice() {
    return advice;
  }
}
