package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class LogTextTests {

  @Test
  void textIsCutAtAThousandCharactersAndIdsAt255PlusAnEllipsis() {
    assertThat(LogText.text("short")).isEqualTo("short");
    assertThat(LogText.text(null)).isEqualTo("null");
    String text = LogText.text("t".repeat(100_000));
    assertThat(text).hasSize(LogText.MAX_TEXT).endsWith("...");
    assertThat(LogText.error(new IllegalStateException("e".repeat(100_000)))).hasSize(LogText.MAX_TEXT)
        .startsWith("java.lang.IllegalStateException: eee");

    assertThat(LogText.id("pay-1")).isEqualTo("pay-1");
    assertThat(LogText.id("i".repeat(255))).isEqualTo("i".repeat(255));
    assertThat(LogText.id("i".repeat(10_000))).isEqualTo("i".repeat(255) + "...");
  }

  @Test
  void aCutNeverSplitsASurrogatePair() {
    String emoji = "\uD83D\uDE00";
    String id = "i".repeat(254) + emoji + "tail";
    assertThat(LogText.id(id)).isEqualTo("i".repeat(254) + "...");
  }
}
