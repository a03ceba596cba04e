package dev.idem.test.internal;

import dev.idem.IdempotentConsumer;
import dev.idem.Outcome;
import dev.idem.test.ContractReport;
import dev.idem.test.ContractReport.ScheduleRun;
import dev.idem.test.Finding;
import dev.idem.test.InMemoryDelivery;
import dev.idem.test.Mistake;
import dev.idem.test.Schedule;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Runs the schedules of a contract in order: the clean run (twice), the id rule, a fresh handler
 * per message and the failure injection here, the concurrent ones in {@link ConcurrentSchedules}.
 * Each schedule stops at its first divergence and reports it as one {@link Finding}.
 *
 * @param <T> the payload type
 */
public final class ContractRunner<T> {

  private final ContractSettings<T> settings;
  private final List<Finding> findings = new ArrayList<>();
  private final List<ScheduleRun> runs = new ArrayList<>();

  /**
   * A runner for these settings.
   *
   * @param settings the contract's settings
   */
  public ContractRunner(ContractSettings<T> settings) {
    this.settings = settings;
  }

  /**
   * Runs every schedule.
   *
   * @return the report
   */
  public ContractReport run() {
    long start = System.nanoTime();
    try (Harness<T> harness = new Harness<>(settings)) {
      CleanRun reference = timed(harness, Schedule.CLEAN_RUN, () -> {
        CleanRun first = cleanRun(harness);
        CleanRun second = cleanRun(harness);
        compareCleanRuns(first, second);
        return first;
      });
      boolean comparable = findings.isEmpty(); // when two clean runs differ, no schedule can be compared with them
      timed(harness, Schedule.MESSAGE_ID_STABILITY, () -> idStability(harness));
      if (comparable) {
        timed(harness, Schedule.FRESH_HANDLER_PER_MESSAGE, () -> freshHandlerPerMessage(harness, reference));
        timed(harness, Schedule.FAILURE_AFTER_EACH_STATEMENT, () -> failureAfterEachStatement(harness, reference));
        ConcurrentSchedules<T> concurrent = new ConcurrentSchedules<>(harness, settings, reference);
        timed(harness, Schedule.REDELIVERY_AFTER_COMMIT, concurrent::redeliveryAfterCommit);
        timed(harness, Schedule.DUPLICATES_IN_AND_ACROSS_BATCHES, concurrent::duplicatesInAndAcrossBatches);
        timed(harness, Schedule.CONCURRENT_LANES_BATCH, () -> concurrent.concurrentLanes(Schedule.CONCURRENT_LANES_BATCH,
            IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE));
        timed(harness, Schedule.CONCURRENT_LANES_PER_MESSAGE,
            () -> concurrent.concurrentLanes(Schedule.CONCURRENT_LANES_PER_MESSAGE, 1));
        timed(harness, Schedule.STOP_MID_BATCH, concurrent::stopMidBatch);
      }
    }
    return new ContractReport(settings.name(), settings.messages().size(), runs, findings,
        Duration.ofNanos(System.nanoTime() - start));
  }

  private interface Step<R> {
    R run();
  }

  private <R> R timed(Harness<T> harness, Schedule schedule, Step<R> step) {
    long start = System.nanoTime();
    int before = harness.deliveries();
    R result = step.run();
    if (result instanceof Optional<?> found && found.isPresent()) {
      findings.add((Finding) found.get());
    }
    runs.add(new ScheduleRun(schedule, harness.deliveries() - before, Duration.ofNanos(System.nanoTime() - start)));
    return result;
  }

  /**
   * The reference: the probe after the reset and after each message, and what each message's handler did.
   *
   * @param probes {@code probes.get(i)} is the state before message {@code i}; the last, after all
   * @param statements the statements each message's handler ran
   * @param ids the id each message got
   */
  record CleanRun(List<List<Object>> probes, List<Integer> statements, List<String> ids) {
    List<Object> after(int message) {
      return probes.get(message + 1);
    }

    List<Object> end() {
      return probes.get(probes.size() - 1);
    }
  }

  private CleanRun cleanRun(Harness<T> harness) {
    harness.reset();
    List<List<Object>> probes = new ArrayList<>();
    List<Integer> statements = new ArrayList<>();
    List<String> ids = new ArrayList<>();
    probes.add(harness.probe());
    try (Line<T> line = harness.line(harness.consumer(harness.newConsumerName(), 1, 1))) {
      for (InMemoryDelivery<T> template : settings.messages()) {
        InMemoryDelivery<T> delivery = harness.delivery(template, 1);
        long before = harness.statements();
        line.process(delivery);
        statements.add((int) (harness.statements() - before));
        ids.add(delivery.id());
        probes.add(harness.probe());
      }
    }
    return new CleanRun(probes, statements, ids);
  }

  private void compareCleanRuns(CleanRun first, CleanRun second) {
    for (int i = 0; i < first.probes().size(); i++) {
      if (!Objects.equals(first.probes().get(i), second.probes().get(i))) {
        String step = i == 0
            ? "right after the reset, before any message"
            : "after message " + first.ids().get(i - 1) + " (" + i + " of " + settings.messages().size() + ")";
        findings.add(new Finding(Mistake.PROBE_NOT_REPEATABLE, Schedule.CLEAN_RUN, step + ", second clean run",
            i == 0 ? List.of() : List.of(first.ids().get(i - 1)), String.valueOf(first.probes().get(i)),
            String.valueOf(second.probes().get(i))));
        return;
      }
    }
  }

  private Optional<Finding> idStability(Harness<T> harness) {
    for (InMemoryDelivery<T> template : settings.messages()) {
      String first = harness.delivery(template, 1).id();
      String again = harness.delivery(template, 1).id();
      String redelivered = harness.delivery(template, 2).id();
      if (!Objects.equals(first, again) || !Objects.equals(first, redelivered)) {
        return Optional.of(new Finding(Mistake.UNSTABLE_MESSAGE_ID, Schedule.MESSAGE_ID_STABILITY,
            "the id rule applied to the first delivery twice, then to a redelivery (attempt 2, a later timestamp)",
            List.of(String.valueOf(first)), "the same id three times: " + first,
            first + ", " + again + ", " + redelivered));
      }
    }
    return Optional.empty();
  }

  private Optional<Finding> freshHandlerPerMessage(Harness<T> harness, CleanRun reference) {
    harness.reset();
    List<InMemoryDelivery<T>> messages = settings.messages();
    try (Line<T> line = harness.line(harness.consumer(harness.newConsumerName(), 1, 1, true))) {
      for (int i = 0; i < messages.size(); i++) {
        InMemoryDelivery<T> delivery = harness.delivery(messages.get(i), 1);
        line.process(delivery);
        List<Object> state = harness.probe();
        if (!state.equals(reference.after(i))) {
          return Optional.of(new Finding(Mistake.STATE_KEPT_IN_MEMORY, Schedule.FRESH_HANDLER_PER_MESSAGE,
              "after message " + delivery.id() + " (" + (i + 1) + " of " + messages.size()
                  + "), run by a new handler instance where the clean run's instance had seen the messages before it",
              List.of(delivery.id()), String.valueOf(reference.after(i)), String.valueOf(state)));
        }
      }
    }
    return Optional.empty();
  }

  private Optional<Finding> failureAfterEachStatement(Harness<T> harness, CleanRun reference) {
    harness.reset();
    try (Line<T> line = harness.line(harness.consumer(harness.newConsumerName(), 1, 1))) {
      return failureAfterEachStatement(harness, line, reference);
    }
  }

  private Optional<Finding> failureAfterEachStatement(Harness<T> harness, Line<T> line, CleanRun reference) {
    List<InMemoryDelivery<T>> messages = settings.messages();
    for (int i = 0; i < messages.size(); i++) {
      int statements = reference.statements().get(i);
      int attempt = 1;
      // With no statement through the Tx, the failure comes when the handler completes: whatever it
      // wrote elsewhere must not survive.
      for (int failAfter = statements == 0 ? 0 : 1; failAfter <= statements; failAfter++) {
        InMemoryDelivery<T> delivery = harness.delivery(messages.get(i), attempt++);
        long calls = harness.sideEffects();
        harness.failAfter(failAfter);
        Outcome<T> outcome;
        try {
          outcome = line.process(delivery);
        } finally {
          harness.failAfter(Attempt.NO_FAILURE);
        }
        if (outcome.status() != Outcome.Status.DEAD_LETTERED) {
          break; // this attempt ran fewer statements than the clean run's and committed
        }
        String step = "after the rolled-back attempt of message " + delivery.id() + " (" + (i + 1) + " of "
            + messages.size() + "), with a failure injected "
            + (statements == 0
                ? "when the handler completed (it ran no statement through its Tx)"
                : "after statement " + failAfter + " of " + statements);
        List<Object> state = harness.probe();
        if (!state.equals(reference.probes().get(i))) {
          return Optional.of(new Finding(Mistake.EFFECT_OUTSIDE_TRANSACTION, Schedule.FAILURE_AFTER_EACH_STATEMENT,
              step, List.of(delivery.id()), "the state before the message: " + reference.probes().get(i),
              String.valueOf(state)));
        }
        long made = harness.sideEffects() - calls;
        if (made > 0) {
          return Optional.of(new Finding(Mistake.SIDE_EFFECT_OUTSIDE_OUTBOX, Schedule.FAILURE_AFTER_EACH_STATEMENT,
              step, List.of(delivery.id()), "no call to an outside system from an attempt that rolled back",
              made + (made == 1 ? " call" : " calls")));
        }
      }
      InMemoryDelivery<T> retry = harness.delivery(messages.get(i), attempt);
      line.process(retry);
      List<Object> state = harness.probe();
      if (!state.equals(reference.after(i))) {
        return Optional.of(new Finding(Mistake.STATE_KEPT_IN_MEMORY, Schedule.FAILURE_AFTER_EACH_STATEMENT,
            "after message " + retry.id() + " (" + (i + 1) + " of " + messages.size() + ") succeeded on attempt "
                + attempt + ", following rolled-back attempts that left the database as it was: the handler "
                + "remembered something of them",
            List.of(retry.id()), String.valueOf(reference.after(i)), String.valueOf(state)));
      }
    }
    return Optional.empty();
  }
}
