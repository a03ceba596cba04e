package dev.idem.kafka;

/**
 * Which Kafka client machinery a {@link KafkaSource} runs on. Both engines keep the same
 * contract (ordered commits of the contiguous settled offsets, backpressure by pausing
 * partitions, a bounded wait for revoked partitions, commit on cancel); they differ in the
 * client versions they run on.
 */
public enum KafkaEngine {

  /**
   * The default: Idem's own engine on kafka-clients' {@code KafkaConsumer}, one polling thread per
   * subscription. Runs on kafka-clients 3.9.x and 4.x (CI tests 3.9.1, 4.1.2, 4.2.2 and 4.4.0), including 4.x's
   * {@code group.protocol=consumer}. Needs nothing beyond kafka-clients.
   */
  NATIVE,

  /**
   * Reactor Kafka's receiver ({@code io.projectreactor.kafka:reactor-kafka}, an optional
   * dependency of idem-kafka that the application then declares itself). Reactor Kafka is
   * discontinued; its releases (the last is 1.3.25) were built for kafka-clients 3.x, and Idem
   * tests this engine on 3.x only: selecting it with kafka-clients 4.x fails when the source is
   * created, naming both versions. Kept for applications that already run on it.
   */
  REACTOR_KAFKA
}
