package dev.idem.rabbit.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class LogTextTests {

  @Test
  void idsAreCutTo255CharactersAndMarked() {
    assertThat(LogText.id("m-1")).isEqualTo("m-1");
    assertThat(LogText.id("x".repeat(255))).isEqualTo("x".repeat(255));
    assertThat(LogText.id("x".repeat(256))).isEqualTo("x".repeat(255) + "...");
    assertThat(LogText.id("x".repeat(100_000))).hasSize(258);
    assertThat(LogText.id(null)).isEqualTo("<none>");
  }

  @Test
  void textsAndErrorsAreCutTo1000Characters() {
    assertThat(LogText.text("y".repeat(5_000))).isEqualTo("y".repeat(1_000) + "...");
    assertThat(LogText.text(null)).isNull();
    String error = LogText.error(new IllegalStateException("z".repeat(5_000)));
    assertThat(error).startsWith("java.lang.IllegalStateException: zzz").endsWith("...").hasSize(1_003);
    assertThat(LogText.error(new StackOverflowError())).isEqualTo("java.lang.StackOverflowError");
  }

  @Test
  void aSurrogatePairIsNeverSplit() {
    String text = "a".repeat(254) + "\uD83D\uDE00" + "b";
    assertThat(LogText.id(text)).isEqualTo("a".repeat(254) + "...");
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

  @Test
  void settlementExceptionsCutTheirTrigger() {
    SettlementException e = new SettlementException("ack of message 'm' failed", new IllegalStateException("w".repeat(50_000)));
    assertThat(e.getMessage()).hasSizeLessThan(1_100).endsWith("...");
  }
}
