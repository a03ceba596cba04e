package dev.idem.spring;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A consumer's source ({@code idem.consumers.<name>.source.*}). {@code type} says which
 * settings apply; setting one of the other type's fails at start naming it.
 */
public class IdemSourceProperties {
  private IdemProperties.@Nullable SourceType type;
  // Kafka
  private @Nullable String bootstrapServers;
  private List<String> topics = new ArrayList<>();
  private @Nullable String groupId;
  private @Nullable String deadLetterTopic;
  private @Nullable String deadLetterTopicSuffix;
  private @Nullable String messageIdHeader;
  private Map<String, String> properties = new LinkedHashMap<>();
  private IdemProperties.@Nullable KafkaEngineType engine;
  private @Nullable Integer shareConsumers;
  // RabbitMQ
  private @Nullable String uri;
  private @Nullable String queue;
  private @Nullable String deadLetterExchange;
  private @Nullable String deadLetterRoutingKey;
  private @Nullable String deadLetterMode;

  /** Creates the settings with their defaults. */
  public IdemSourceProperties() {}

  /**
   * The broker: {@code kafka} (a consumer group), {@code kafka-share} (a share group; both need
   * {@code idem-kafka}) or {@code rabbitmq} (needs {@code idem-rabbit}). Required.
   *
   * @return the type, or {@code null} when not set
   */
  public IdemProperties.@Nullable SourceType getType() {
    return type;
  }

  /**
   * Sets the type.
   *
   * @param type the type
   */
  public void setType(IdemProperties.@Nullable SourceType type) {
    this.type = type;
  }

  /**
   * Kafka: the bootstrap servers. Default: {@code spring.kafka.bootstrap-servers} when set.
   *
   * @return the servers, or {@code null} when not set
   */
  public @Nullable String getBootstrapServers() {
    return bootstrapServers;
  }

  /**
   * Sets the bootstrap servers.
   *
   * @param bootstrapServers the servers
   */
  public void setBootstrapServers(@Nullable String bootstrapServers) {
    this.bootstrapServers = bootstrapServers;
  }

  /**
   * Kafka: the topics. Required for Kafka.
   *
   * @return the topics
   */
  public List<String> getTopics() {
    return topics;
  }

  /**
   * Sets the topics.
   *
   * @param topics the topics
   */
  public void setTopics(List<String> topics) {
    this.topics = topics;
  }

  /**
   * Kafka: the consumer group. Default: the consumer's name.
   *
   * @return the group id, or {@code null} when not set
   */
  public @Nullable String getGroupId() {
    return groupId;
  }

  /**
   * Sets the group id.
   *
   * @param groupId the group id
   */
  public void setGroupId(@Nullable String groupId) {
    this.groupId = groupId;
  }

  /**
   * Kafka: one dead-letter topic for every source topic. Default: {@code <topic>.DLT}.
   *
   * @return the topic, or {@code null} when not set
   */
  public @Nullable String getDeadLetterTopic() {
    return deadLetterTopic;
  }

  /**
   * Sets the dead-letter topic.
   *
   * @param deadLetterTopic the topic
   */
  public void setDeadLetterTopic(@Nullable String deadLetterTopic) {
    this.deadLetterTopic = deadLetterTopic;
  }

  /**
   * Kafka: the suffix that names each topic's dead-letter topic. Default {@code .DLT}.
   *
   * @return the suffix, or {@code null} when not set
   */
  public @Nullable String getDeadLetterTopicSuffix() {
    return deadLetterTopicSuffix;
  }

  /**
   * Sets the dead-letter suffix.
   *
   * @param deadLetterTopicSuffix the suffix
   */
  public void setDeadLetterTopicSuffix(@Nullable String deadLetterTopicSuffix) {
    this.deadLetterTopicSuffix = deadLetterTopicSuffix;
  }

  /**
   * Kafka: the header carrying the message id. Default {@code message-id}.
   *
   * @return the header, or {@code null} when not set
   */
  public @Nullable String getMessageIdHeader() {
    return messageIdHeader;
  }

  /**
   * Sets the id header.
   *
   * @param messageIdHeader the header
   */
  public void setMessageIdHeader(@Nullable String messageIdHeader) {
    this.messageIdHeader = messageIdHeader;
  }

  /**
   * Kafka: further consumer properties (security, timeouts), passed as they are; the source
   * refuses the ones it owns.
   *
   * @return the properties
   */
  public Map<String, String> getProperties() {
    return properties;
  }

  /**
   * Sets the consumer properties.
   *
   * @param properties the properties
   */
  public void setProperties(Map<String, String> properties) {
    this.properties = properties;
  }

  /**
   * Kafka: the engine the source runs on, {@code native} or {@code reactor-kafka}
   * ({@code KafkaSourceOptions.Builder#engine}). Default {@code native}: Idem's own engine on
   * kafka-clients' {@code KafkaConsumer}, which runs on kafka-clients 3.9.x and 4.x, so on the
   * kafka-clients that Spring Boot manages. {@code reactor-kafka} runs on Reactor Kafka, which
   * is discontinued and runs on kafka-clients 3.x only; it needs
   * {@code io.projectreactor.kafka:reactor-kafka} in the application's build (idem-kafka
   * declares it optional) and, under Spring Boot 4, kafka-clients pinned to 3.9.x. Without
   * them the application fails at start, naming what is missing.
   *
   * @return the engine, or {@code null} for the default ({@code native})
   */
  public IdemProperties.@Nullable KafkaEngineType getEngine() {
    return engine;
  }

  /**
   * Sets the engine.
   *
   * @param engine {@code native} or {@code reactor-kafka}
   */
  public void setEngine(IdemProperties.@Nullable KafkaEngineType engine) {
    this.engine = engine;
  }

  /**
   * Kafka share groups ({@code type: kafka-share}): the share consumers each instance runs.
   * Default 1.
   *
   * @return the count, {@code null} when not set
   */
  public @Nullable Integer getShareConsumers() {
    return shareConsumers;
  }

  /**
   * Sets the share consumers.
   *
   * @param shareConsumers at least 1
   */
  public void setShareConsumers(@Nullable Integer shareConsumers) {
    this.shareConsumers = shareConsumers;
  }

  /**
   * RabbitMQ: the broker URI. Default {@code amqp://guest:guest@localhost:5672}.
   *
   * @return the URI, or {@code null} when not set
   */
  public @Nullable String getUri() {
    return uri;
  }

  /**
   * Sets the URI.
   *
   * @param uri the URI
   */
  public void setUri(@Nullable String uri) {
    this.uri = uri;
  }

  /**
   * RabbitMQ: the queue. Required for RabbitMQ.
   *
   * @return the queue, or {@code null} when not set
   */
  public @Nullable String getQueue() {
    return queue;
  }

  /**
   * Sets the queue.
   *
   * @param queue the queue
   */
  public void setQueue(@Nullable String queue) {
    this.queue = queue;
  }

  /**
   * RabbitMQ: the exchange dead letters are published to. Default {@code <queue>.dlx}.
   *
   * @return the exchange, or {@code null} when not set
   */
  public @Nullable String getDeadLetterExchange() {
    return deadLetterExchange;
  }

  /**
   * Sets the dead-letter exchange.
   *
   * @param deadLetterExchange the exchange ({@code ""} for the default exchange)
   */
  public void setDeadLetterExchange(@Nullable String deadLetterExchange) {
    this.deadLetterExchange = deadLetterExchange;
  }

  /**
   * RabbitMQ: the routing key of dead letters. Default: the queue's name.
   *
   * @return the routing key, or {@code null} when not set
   */
  public @Nullable String getDeadLetterRoutingKey() {
    return deadLetterRoutingKey;
  }

  /**
   * Sets the dead-letter routing key.
   *
   * @param deadLetterRoutingKey the routing key
   */
  public void setDeadLetterRoutingKey(@Nullable String deadLetterRoutingKey) {
    this.deadLetterRoutingKey = deadLetterRoutingKey;
  }

  /**
   * RabbitMQ: {@code publish-with-confirms} (the default) or {@code reject-to-queue-dlx}.
   *
   * @return the mode, or {@code null} when not set
   */
  public @Nullable String getDeadLetterMode() {
    return deadLetterMode;
  }

  /**
   * Sets the dead-letter mode.
   *
   * @param deadLetterMode the mode
   */
  public void setDeadLetterMode(@Nullable String deadLetterMode) {
    this.deadLetterMode = deadLetterMode;
  }
}
