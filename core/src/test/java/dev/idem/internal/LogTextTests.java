package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class LogTextTests {

  @Test
  void longTextsAndIdsAreCutAndSayHowMuchWasCut() {
    assertThat(LogText.cut("short")).isEqualTo("short");
    assertThat(LogText.cut(null)).isNull();
    assertThat(LogText.cut("x".repeat(100_000))).startsWith("x".repeat(LogText.MAX_TEXT)).endsWith("...(99000 more characters)");
    assertThat(LogText.cutId("i".repeat(300))).isEqualTo("i".repeat(255) + "...(45 more characters)");
  }

  @Test
  void aCutNeverSplitsASurrogatePair() {
    String id = "i".repeat(254) + "\uD83D\uDCB3" + "tail";
    assertThat(LogText.cutId(id)).startsWith("i".repeat(254) + "...");
  }
}
