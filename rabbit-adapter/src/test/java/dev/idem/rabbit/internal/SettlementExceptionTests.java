package dev.idem.rabbit.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class SettlementExceptionTests {

  @Test
  void settlementExceptionsCutTheirTrigger() {
    SettlementException e = new SettlementException("ack of message 'm' failed", new IllegalStateException("w".repeat(50_000)));
    assertThat(e.getMessage()).hasSizeLessThan(1_100).endsWith("more characters)");
  }
}
