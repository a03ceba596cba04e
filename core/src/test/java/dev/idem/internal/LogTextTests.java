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

  @Test
  void idsErrorsAndObjectsAreCutForLogLines() {
    assertThat(LogText.id("m-1")).isEqualTo("m-1");
    assertThat(LogText.id(null)).isEqualTo("<none>");
    assertThat(LogText.id("x".repeat(256))).isEqualTo("x".repeat(255) + "...(1 more characters)");
    assertThat(LogText.error(null)).isNull();
    assertThat(LogText.error(new StackOverflowError())).isEqualTo("java.lang.StackOverflowError");
    assertThat(LogText.error(new IllegalStateException("z".repeat(5_000))))
        .startsWith("java.lang.IllegalStateException: zzz").endsWith("...(4033 more characters)");
    assertThat(LogText.describe("y".repeat(5_000))).isEqualTo("y".repeat(1_000) + "...(4000 more characters)");
  }

  @Test
  void anErrorOrObjectWhoseToStringThrowsIsStillDescribed() {
    Throwable nasty = new RuntimeException() {
      private static final long serialVersionUID = 1L;

      @Override
      public String toString() {
        throw new IllegalStateException("no");
      }
    };
    assertThat(LogText.error(nasty)).contains("its toString() failed: java.lang.IllegalStateException");
    Object opaque = new Object() {
      @Override
      public String toString() {
        throw new UnsupportedOperationException();
      }
    };
    assertThat(LogText.describe(opaque)).isEqualTo(opaque.getClass().getName());
  }
}
