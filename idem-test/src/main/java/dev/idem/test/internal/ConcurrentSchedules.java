package dev.idem.test.internal;

import dev.idem.IdempotentConsumer;
import dev.idem.test.Finding;
import dev.idem.test.InMemoryDelivery;
import dev.idem.test.Mistake;
import dev.idem.test.Schedule;
import dev.idem.test.internal.ContractRunner.CleanRun;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The schedules that hand the pipeline many deliveries at once or restart it: redelivery after
 * commit, duplicates in and across batches, concurrent lanes, a stop mid-batch. Each compares the
 * probe with the clean run's at the points where the two must agree.
 *
 * @param <T> the payload type
 */
final class ConcurrentSchedules<T> {

  private static final int LANES = Harness.MAX_LANES;

  private final Harness<T> harness;
  private final List<InMemoryDelivery<T>> messages;
  private final CleanRun reference;

  ConcurrentSchedules(Harness<T> harness, ContractSettings<T> settings, CleanRun reference) {
    this.harness = harness;
    this.messages = settings.messages();
    this.reference = reference;
  }

  Optional<Finding> redeliveryAfterCommit() {
    harness.reset();
    String name = harness.newConsumerName();
    try (Line<T> line = harness.line(harness.consumer(name, 1, 1))) {
      for (int i = 0; i < messages.size(); i++) {
        InMemoryDelivery<T> first = harness.delivery(messages.get(i), 1);
        line.process(first);
        InMemoryDelivery<T> again = harness.delivery(messages.get(i), 2);
        line.process(again);
        List<Object> state = harness.probe();
        if (!state.equals(reference.after(i))) {
          return Optional.of(diverged(Schedule.REDELIVERY_AFTER_COMMIT, "after message " + first.id() + " ("
              + (i + 1) + " of " + messages.size() + ") and its redelivery (ack lost after the commit)",
              ids(List.of(first, again)), reference.after(i), state));
        }
      }
    }
    List<InMemoryDelivery<T>> all = deliveries(3);
    harness.process(harness.consumer(name, IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, LANES), all);
    return compareEnd(Schedule.REDELIVERY_AFTER_COMMIT,
        "after every message was delivered again to a restarted consumer (a new handler instance)", all);
  }

  Optional<Finding> duplicatesInAndAcrossBatches() {
    harness.reset();
    IdempotentConsumer<T> consumer = harness.consumer(harness.newConsumerName(),
        IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, LANES);
    List<InMemoryDelivery<T>> burst = new ArrayList<>();
    for (InMemoryDelivery<T> template : messages) {
      burst.add(harness.delivery(template, 1));
      burst.add(harness.delivery(template, 2));
    }
    harness.process(consumer, burst);
    List<InMemoryDelivery<T>> again = deliveries(3);
    harness.process(consumer, again);
    burst.addAll(again);
    return compareEnd(Schedule.DUPLICATES_IN_AND_ACROSS_BATCHES,
        "after a burst holding every message twice, then every message again", burst);
  }

  Optional<Finding> concurrentLanes(Schedule schedule, int maxBatchSize) {
    harness.reset();
    List<InMemoryDelivery<T>> all = deliveries(1);
    harness.process(harness.consumer(harness.newConsumerName(), maxBatchSize, LANES), all);
    return compareEnd(schedule, "after every message, on " + LANES + " lanes"
        + (maxBatchSize == 1 ? ", one transaction each" : ", in batches"), all);
  }

  Optional<Finding> stopMidBatch() {
    harness.reset();
    String name = harness.newConsumerName();
    List<InMemoryDelivery<T>> first = deliveries(1);
    int settled = Math.max(1, messages.size() / 2);
    harness.processAndStop(harness.consumer(name, IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, LANES), first, settled);
    List<InMemoryDelivery<T>> again = deliveries(2);
    harness.process(harness.consumer(name, IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE, LANES), again);
    long unsettled = first.stream().filter(d -> d.settledAs() == null).count();
    return compareEnd(Schedule.STOP_MID_BATCH, "after a stop with " + settled + " of " + messages.size()
        + " messages settled (" + unsettled + " never settled), then every message to a fresh consumer", again);
  }

  private List<InMemoryDelivery<T>> deliveries(int attempt) {
    return messages.stream().map(m -> harness.delivery(m, attempt)).toList();
  }

  private Optional<Finding> compareEnd(Schedule schedule, String step, List<InMemoryDelivery<T>> involved) {
    List<Object> state = harness.probe();
    if (state.equals(reference.end())) {
      return Optional.empty();
    }
    return Optional.of(diverged(schedule, step, ids(involved), reference.end(), state));
  }

  private static List<String> ids(List<? extends InMemoryDelivery<?>> deliveries) {
    return deliveries.stream().map(d -> String.valueOf(d.id())).distinct().toList();
  }

  private static Finding diverged(Schedule schedule, String step, List<String> ids, List<Object> expected,
      List<Object> actual) {
    return new Finding(Mistake.EFFECTS_DIVERGED, schedule, step, ids, String.valueOf(expected),
        String.valueOf(actual));
  }
}
