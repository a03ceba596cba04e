package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ClientsVersionTests {

  @Test
  void readsTheVersionOfTheKafkaClientsOnTheClassPath() {
    // The build passes the kafka.version it resolved (the matrix runs this suite on 3.9.x and 4.x).
    String expected = System.getProperty("idem.test.kafka.clients.version");
    assertThat(expected).as("set by the root pom's surefire configuration").isNotBlank();
    assertThat(ClientsVersion.current()).isEqualTo(expected);
  }
}
