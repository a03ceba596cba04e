package dev.idem.spring;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class KafkaClientsVersionTests {

  @Test
  void kafkaClients3IsAccepted() {
    assertThatCode(() -> KafkaClientsVersion.check("3.9.1")).doesNotThrowAnyException();
    assertThatCode(() -> KafkaClientsVersion.check("3.7.0-SNAPSHOT")).doesNotThrowAnyException();
  }

  @Test
  void kafkaClients4IsRefusedWithTheVersionAndTheFix() {
    assertThatThrownBy(() -> KafkaClientsVersion.check("4.1.1"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("kafka-clients 4.1.1")
        .hasMessageContaining("reactor-kafka#420")
        .hasMessageContaining("<kafka.version>3.9.1</kafka.version>")
        .hasMessageContaining("idem-bom");
  }

  @Test
  void anUnknownVersionIsRefused() {
    assertThatThrownBy(() -> KafkaClientsVersion.check(null)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> KafkaClientsVersion.check("unknown")).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void theKafkaClientsOfThisBuildPassTheCheck() {
    assertThatCode(KafkaClientsVersion::checkClassPath).doesNotThrowAnyException();
  }
}
