package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ReactorKafkaSupportTests {

  @Test
  void theReactorKafkaEngineRunsOnKafkaClients3() {
    assertThatCode(() -> ReactorKafkaSupport.check("3.9.1", true)).doesNotThrowAnyException();
  }

  @Test
  void onKafkaClients4TheReactorKafkaEngineIsRefusedNamingBothVersionsAndTheWayOut() {
    assertThatThrownBy(() -> ReactorKafkaSupport.check("4.1.2", true))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("kafka-clients 4.1.2")
        .hasMessageContaining("3.x only")
        .hasMessageContaining("NATIVE");
  }

  @Test
  void withoutReactorKafkaOnTheClassPathTheEngineIsRefusedSayingWhatToAdd() {
    assertThatThrownBy(() -> ReactorKafkaSupport.check("3.9.1", false))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("io.projectreactor.kafka:reactor-kafka");
  }
}
