/**
 * The Kafka adapter of Idem: {@link dev.idem.kafka.KafkaSource} turns a topic subscription into
 * deliveries for {@link dev.idem.IdempotentConsumer}, commits offsets only up to the first
 * unsettled record of each partition, publishes dead letters to {@code <topic>.DLT}, and
 * {@link dev.idem.kafka.KafkaDeadLetterReplayer} puts them back after a fix. It runs on
 * kafka-clients 3.9 to 4.x alone ({@link dev.idem.kafka.KafkaEngine#NATIVE}, the default); Reactor
 * Kafka 1.3 stays an engine to choose on kafka-clients 3.x ({@link dev.idem.kafka.KafkaEngine#REACTOR_KAFKA}).
 * {@link dev.idem.kafka.KafkaShareSource} reads a share group instead (kafka-clients 4.1 and later).
 */
@NullMarked
package dev.idem.kafka;

import org.jspecify.annotations.NullMarked;
