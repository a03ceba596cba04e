/**
 * The Kafka adapter of Idem: {@link dev.idem.kafka.KafkaSource} turns a topic subscription into
 * deliveries for {@link dev.idem.IdempotentConsumer}, commits offsets only up to the first
 * unsettled record of each partition, publishes dead letters to {@code <topic>.DLT}, and
 * {@link dev.idem.kafka.KafkaDeadLetterReplayer} puts them back after a fix. Built on Reactor
 * Kafka 1.3 and kafka-clients 3.9.
 */
package dev.idem.kafka;
