package dev.idem.rabbit.internal;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.impl.LongStringHelper;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DeliveryAttemptsTests {

  @Test
  void firstDeliveryIsAttemptOne() {
    assertThat(DeliveryAttempts.of(false, null)).isEqualTo(1);
    assertThat(DeliveryAttempts.of(false, Map.of())).isEqualTo(1);
  }

  @Test
  void redeliveredFlagWithoutCounterIsAttemptTwo() {
    assertThat(DeliveryAttempts.of(true, Map.of())).isEqualTo(2);
  }

  @Test
  void quorumDeliveryCountCountsEarlierDeliveries() {
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", 1L))).isEqualTo(2);
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", 4))).isEqualTo(5);
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", LongStringHelper.asLongString("6")))).isEqualTo(7);
  }

  @Test
  void redeliveredFlagWinsOverAStaleZeroCounter() {
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", 0L))).isEqualTo(2);
  }

  @Test
  void garbageCounterFallsBackToTheFlag() {
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", "many"))).isEqualTo(2);
    assertThat(DeliveryAttempts.of(false, Map.of("x-delivery-count", -3L))).isEqualTo(1);
  }

  @Test
  void hugeCounterIsCapped() {
    assertThat(DeliveryAttempts.of(true, Map.of("x-delivery-count", Long.MAX_VALUE))).isEqualTo(Integer.MAX_VALUE);
  }
}
