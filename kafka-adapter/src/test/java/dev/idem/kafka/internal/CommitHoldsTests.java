package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import dev.idem.internal.LogText;
import dev.idem.kafka.testing.LogCapture;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.junit.jupiter.api.Test;

class CommitHoldsTests {

  private static ConsumerRecord<byte[], byte[]> record(int partition, long offset) {
    return new ConsumerRecord<>("orders", partition, offset, null, "v".getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void aFailedDeadLetterIsLoggedAndCountedOnceAndHoldsItsPartitionUntilSettledOrRevoked() {
    AtomicInteger failed = new AtomicInteger();
    CommitHolds holds = new CommitHolds("g", failed::incrementAndGet);
    try (LogCapture logs = LogCapture.of("dev.idem.kafka")) {
      RecordTooLargeException error = new RecordTooLargeException("too large");
      holds.deadLetterFailed(record(0, 7), "pay-7", "orders.DLT", error);
      holds.deadLetterFailed(record(0, 7), "pay-7", "orders.DLT", error);
      holds.deadLetterFailed(record(0, 9), "pay-9", "orders.DLT", error);
      holds.deadLetterFailed(record(1, 3), "pay-3", "orders.DLT", error);
      assertThat(failed.get()).isEqualTo(3);
      assertThat(logs.messages(Level.ERROR, m -> m.contains("orders-0@7 (message 'pay-7') failed for good on orders.DLT")))
          .hasSize(1);
      assertThat(holds.heldPartitions()).isEqualTo(2);

      holds.report();
      assertThat(logs.messages(Level.ERROR, m -> m.contains("the commits of orders-0 are held at offset 7 for "))).singleElement()
          .satisfies(
              m -> assertThat(m).contains("'pay-7'", "RecordTooLargeException: too large", "1 more such records after it"));
      assertThat(logs.messages(Level.ERROR, m -> m.contains("the commits of orders-1 are held at offset 3 for "))).hasSize(1);

      holds.settled(record(0, 7));
      holds.settled(record(0, 9));
      assertThat(holds.heldPartitions()).isEqualTo(1);
      holds.revoked(List.of(new TopicPartition("orders", 1)));
      assertThat(holds.heldPartitions()).isZero();
      assertThat(logs.messages(Level.WARN, m -> m.contains("orders-1 was revoked while its commits were held at offset 3")))
          .hasSize(1);

      holds.close();
      holds.deadLetterFailed(record(2, 1), "pay-1", "orders.DLT", error);
      assertThat(holds.heldPartitions()).isZero();
      assertThat(failed.get()).isEqualTo(4);
    }
  }

  @Test
  void logLinesCutHugeIdsAndErrorTexts() {
    CommitHolds holds = new CommitHolds("g", () -> {});
    try (LogCapture logs = LogCapture.of("dev.idem.kafka")) {
      holds.deadLetterFailed(record(0, 1), "i".repeat(100_000), "orders.DLT", new IllegalStateException("e".repeat(100_000)));
      holds.report();
      assertThat(logs.messages(Level.ERROR, m -> true)).hasSize(2).allSatisfy(m -> {
        assertThat(m).contains("i".repeat(LogText.MAX_ID) + "...(").doesNotContain("i".repeat(LogText.MAX_ID + 1));
        assertThat(m).hasSizeLessThan(LogText.MAX_TEXT + LogText.MAX_ID + 500);
      });
    }
  }

  @Test
  void durationsReadAsMillisecondsSecondsOrHoursMinutesSeconds() {
    assertThat(CommitHolds.describe(Duration.ofMillis(250))).isEqualTo("250 ms");
    assertThat(CommitHolds.describe(Duration.ofSeconds(42))).isEqualTo("42 s");
    assertThat(CommitHolds.describe(Duration.ofSeconds(3725))).isEqualTo("1h 02m 05s");
  }
}
