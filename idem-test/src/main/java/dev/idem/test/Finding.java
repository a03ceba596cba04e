package dev.idem.test;

import java.util.List;
import java.util.Objects;

/**
 * One thing a {@link HandlerContract} run found wrong: the mistake it points to, the schedule and
 * the step at which the effects diverged, the messages involved, and the probe's results.
 *
 * @param mistake the mistake the evidence points to
 * @param schedule the schedule that showed it
 * @param step where in the schedule, in words ("after the rolled-back attempt of message p-2, with a
 *     failure injected after statement 1 of 2")
 * @param messageIds the ids of the messages involved (the one being processed, or all of a burst)
 * @param expected what the clean run's probe read at that point (or the expected value)
 * @param actual what the probe read under the schedule (or the value found)
 */
public record Finding(Mistake mistake, Schedule schedule, String step, List<String> messageIds, String expected,
    String actual) {

  /**
   * Validates the components and copies the ids.
   *
   * @param mistake the mistake the evidence points to
   * @param schedule the schedule that showed it
   * @param step where in the schedule, in words ("after the rolled-back attempt of message p-2, with a
   *     failure injected after statement 1 of 2")
   * @param messageIds the ids of the messages involved (the one being processed, or all of a burst)
   * @param expected what the clean run's probe read at that point (or the expected value)
   * @param actual what the probe read under the schedule (or the value found)
   */
  public Finding {
    Objects.requireNonNull(mistake, "mistake");
    Objects.requireNonNull(schedule, "schedule");
    Objects.requireNonNull(step, "step");
    messageIds = List.copyOf(messageIds);
  }

  /**
   * The finding as a few lines for a test failure.
   *
   * @return the text
   */
  public String describe() {
    return mistake + " in schedule " + schedule + " (" + schedule.description() + ")\n"
        + "    at:       " + step + "\n"
        + "    messages: " + abbreviate(String.join(", ", messageIds)) + "\n"
        + "    expected: " + abbreviate(expected) + "\n"
        + "    actual:   " + abbreviate(actual) + "\n"
        + "    fix:      " + mistake.advice();
  }

  private static String abbreviate(String text) {
    return text == null || text.length() <= 400
        ? String.valueOf(text)
        : text.substring(0, 400) + "... ("
            + text.length() + " chars)";
  }

  @Override
  public String toString() {
    return describe();
  }
}
