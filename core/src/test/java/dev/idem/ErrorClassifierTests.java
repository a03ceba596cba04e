package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;

import io.r2dbc.spi.R2dbcBadGrammarException;
import io.r2dbc.spi.R2dbcDataIntegrityViolationException;
import io.r2dbc.spi.R2dbcNonTransientResourceException;
import io.r2dbc.spi.R2dbcTimeoutException;
import java.net.ConnectException;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

class ErrorClassifierTests {

  private final ErrorClassifier defaults = ErrorClassifier.defaults();

  @Test
  void lostConnectionsAndTimeoutsAreInfrastructure() {
    assertThat(defaults.classify(new R2dbcNonTransientResourceException("Connection closed")))
        .isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new R2dbcTimeoutException("slow"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new TimeoutException("acquire"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new RuntimeException("wrapped", new ConnectException("refused"))))
        .isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new R2dbcBadGrammarException("shutting down", "57P01"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new R2dbcBadGrammarException("conn", "08006"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
  }

  @Test
  void deadlocksSerializationFailuresAndLockTimeoutsAreContentionAndStatementTimeoutsInfrastructure() {
    assertThat(defaults.classify(new io.r2dbc.spi.R2dbcRollbackException("deadlock detected", "40P01")))
        .isEqualTo(ErrorKind.CONTENTION);
    assertThat(defaults.classify(new io.r2dbc.spi.R2dbcRollbackException("could not serialize", "40001")))
        .isEqualTo(ErrorKind.CONTENTION);
    assertThat(defaults.classify(new R2dbcBadGrammarException("lock timeout", "55P03"))).isEqualTo(ErrorKind.CONTENTION);
    assertThat(defaults.classify(new R2dbcBadGrammarException("canceling statement due to statement timeout", "57014")))
        .isEqualTo(ErrorKind.INFRASTRUCTURE);
  }

  @Test
  void nonRetryableExceptionIsNonRetryableEvenWhenWrapped() {
    assertThat(defaults.classify(new NonRetryableException("bad amount"))).isEqualTo(ErrorKind.NON_RETRYABLE);
    assertThat(defaults.classify(new IllegalStateException("x", new NonRetryableException("bad"))))
        .isEqualTo(ErrorKind.NON_RETRYABLE);
  }

  @Test
  void onlyNetworkIoErrorsAreInfrastructureNotEveryIoException() {
    assertThat(defaults.classify(new java.net.SocketException("Connection reset"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new java.net.UnknownHostException("db"))).isEqualTo(ErrorKind.INFRASTRUCTURE);
    assertThat(defaults.classify(new java.io.IOException("Unexpected character"))).isEqualTo(ErrorKind.RETRYABLE);
  }

  @Test
  void everythingElseIsRetryable() {
    assertThat(defaults.classify(new IllegalStateException("bug"))).isEqualTo(ErrorKind.RETRYABLE);
    assertThat(defaults.classify(new R2dbcDataIntegrityViolationException("dup", "23505"))).isEqualTo(ErrorKind.RETRYABLE);
  }

  @Test
  void customClassifierFallsBackToDefaults() {
    ErrorClassifier custom = ((ErrorClassifier) e -> e instanceof IllegalArgumentException ? ErrorKind.NON_RETRYABLE : null)
        .orElse(defaults);
    assertThat(custom.classify(new IllegalArgumentException("bad"))).isEqualTo(ErrorKind.NON_RETRYABLE);
    assertThat(custom.classify(new TimeoutException())).isEqualTo(ErrorKind.INFRASTRUCTURE);
  }
}
