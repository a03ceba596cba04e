package dev.idem.kafka.internal;

import dev.idem.kafka.KafkaEngine;
import dev.idem.kafka.KafkaSourceOptions;
import java.util.Map;

/**
 * Checks, before any reactor-kafka class is loaded, that {@link KafkaEngine#REACTOR_KAFKA} can
 * run here: reactor-kafka on the class path and kafka-clients 3.x. Reactor Kafka is discontinued;
 * its releases were built for kafka-clients 3.x, Spring for Apache Kafka 4 dropped it, and Idem
 * tests this engine on 3.x only, so on 4.x it is refused rather than run untested.
 */
final class ReactorKafkaSupport {

  private ReactorKafkaSupport() {}

  static RecordReceiver receiver(KafkaSourceOptions<?> options, Map<String, Object> consumerProperties) {
    check(ClientsVersion.current(), isPresent());
    return new ReactorKafkaReceiver(options, consumerProperties);
  }

  static void check(String clientsVersion, boolean reactorKafkaPresent) {
    if (!reactorKafkaPresent) {
      throw new IllegalStateException("engine " + KafkaEngine.REACTOR_KAFKA + " needs io.projectreactor.kafka:reactor-kafka "
          + "(1.3.25) on the class path; add it to your build, or use the default engine " + KafkaEngine.NATIVE);
    }
    if (!clientsVersion.startsWith("3.")) {
      throw new IllegalStateException("engine " + KafkaEngine.REACTOR_KAFKA + " runs on kafka-clients 3.x only (Reactor Kafka "
          + "is discontinued, built for 3.x, and tested by Idem on 3.x only), but kafka-clients " + clientsVersion + " is on the "
          + "class path; use the default engine " + KafkaEngine.NATIVE + ", or pin kafka-clients to 3.9.1");
    }
  }

  private static boolean isPresent() {
    try {
      Class.forName("reactor.kafka.receiver.KafkaReceiver", false, ReactorKafkaSupport.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }
}
