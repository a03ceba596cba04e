package dev.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class ServerTimeoutsTests {

  @Test
  void derivedGuardsStopStatementsBeforeTheClientGivesUpAndEndSilentSessionsAtTheTransactionTimeout() {
    ServerTimeouts guards = ServerTimeouts.derivedFrom(Duration.ofSeconds(60));

    assertThat(guards.statementTimeout()).isEqualTo(Duration.ofSeconds(48));
    assertThat(guards.lockTimeout()).isEqualTo(Duration.ofSeconds(48));
    assertThat(guards.idleInTransactionTimeout()).isEqualTo(Duration.ofSeconds(60));
    assertThat(guards.setLocalSql()).isEqualTo("SET LOCAL statement_timeout = 48000;SET LOCAL lock_timeout = 48000;"
        + "SET LOCAL idle_in_transaction_session_timeout = 60000;");
  }

  @Test
  void zeroComponentsAreLeftToTheServer() {
    assertThat(ServerTimeouts.none().setLocalSql()).isEmpty();
    assertThat(new ServerTimeouts(Duration.ZERO, Duration.ofMillis(1500), Duration.ZERO).setLocalSql())
        .isEqualTo("SET LOCAL lock_timeout = 1500;");
  }

  @Test
  void negativeDurationsAreRefusedByName() {
    assertThatThrownBy(() -> new ServerTimeouts(Duration.ofSeconds(-1), Duration.ZERO, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("statementTimeout");
  }
}
