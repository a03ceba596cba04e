package dev.idem.spring.internal;

import dev.idem.BatchHandler;
import dev.idem.Handler;
import dev.idem.Ordering;
import dev.idem.spring.ConsumerSource;
import dev.idem.spring.IdemConsumerDefinition;
import dev.idem.spring.IdemProperties;
import dev.idem.spring.MessageDecoder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.NoSuchBeanDefinitionException;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/**
 * Turns {@code idem.consumers.*} into {@link IdemConsumerDefinition}s. Every problem fails the
 * application's start with a message that names the property.
 */
public final class ConfiguredConsumers {

  private static final String PREFIX = "idem.consumers.";

  private ConfiguredConsumers() {}

  /**
   * The enabled consumers of the configuration.
   *
   * @param properties the bound properties
   * @param beans where handler and decoder beans are looked up
   * @param environment for {@code spring.kafka.bootstrap-servers}
   * @param meterRegistry the application's {@code MeterRegistry} for the Kafka client metrics, or {@code null}
   * @return the definitions
   */
  public static List<IdemConsumerDefinition<?>> definitions(IdemProperties properties, BeanFactory beans, Environment environment,
      @Nullable Object meterRegistry) {
    List<IdemConsumerDefinition<?>> definitions = new ArrayList<>();
    for (Map.Entry<String, IdemProperties.Consumer> entry : properties.getConsumers().entrySet()) {
      if (entry.getValue().isEnabled()) {
        definitions.add(definition(entry.getKey(), entry.getValue(), beans, environment, meterRegistry));
      }
    }
    return definitions;
  }

  private static IdemConsumerDefinition<Object> definition(String name, IdemProperties.Consumer c, BeanFactory beans,
      Environment environment, @Nullable Object meterRegistry) {
    String at = PREFIX + name;
    try {
      MessageDecoder<Object> decoder = Decoders.of(at, c, beans);
      Supplier<ConsumerSource<Object>> source = source(at, name, c, decoder, environment, meterRegistry);
      IdemConsumerDefinition.Builder<Object> builder = IdemConsumerDefinition.<Object>named(name)
          .source(source)
          .transactionTimeout(c.getTransactionTimeout())
          .shutdownGracePeriod(c.getShutdownGracePeriod())
          .health(c.getHealth().getMaxOldestUnsettledAge(), c.getHealth().getMaxFailuresInARow())
          .configure(b -> {
            b.concurrency(c.getConcurrency())
                .prefetch(c.getPrefetch())
                .ordering(c.getOrdering())
                .retry(c.getRetry().toPolicy())
                .batchMaxWait(c.getBatchMaxWait())
                .slowMessageThreshold(c.getSlowMessageThreshold());
            // Unset, the core's default applies, and with it the system property idem.maxBatchSize.
            Integer maxBatchSize = c.getMaxBatchSize();
            if (maxBatchSize != null) {
              b.maxBatchSize(maxBatchSize);
            }
          });
      applyHandler(at, c, beans, builder);
      return builder.build();
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException("Invalid Idem consumer configuration " + at + ": " + e.getMessage(), e);
    }
  }

  @SuppressWarnings("unchecked")
  private static void applyHandler(String at, IdemProperties.Consumer c, BeanFactory beans,
      IdemConsumerDefinition.Builder<Object> builder) {
    if (c.getHandler() == null || c.getHandler().isBlank()) {
      throw new IllegalArgumentException(
          at + ".handler is required: the name of a bean implementing dev.idem.Handler or dev.idem.BatchHandler");
    }
    Object bean;
    try {
      bean = beans.getBean(c.getHandler());
    } catch (NoSuchBeanDefinitionException e) {
      throw new IllegalArgumentException(at + ".handler names a bean '" + c.getHandler() + "' that does not exist", e);
    }
    if (bean instanceof Handler<?> handler) {
      builder.handler((Handler<Object>) handler);
    } else if (bean instanceof BatchHandler<?> batchHandler) {
      builder.batchHandler((BatchHandler<Object>) batchHandler);
    } else {
      throw new IllegalArgumentException(at + ".handler names bean '" + c.getHandler() + "' of type " + bean.getClass().getName()
          + ", which is neither a dev.idem.Handler nor a dev.idem.BatchHandler");
    }
  }

  private static Supplier<ConsumerSource<Object>> source(String at, String name, IdemProperties.Consumer c,
      MessageDecoder<Object> decoder,
      Environment environment, @Nullable Object meterRegistry) {
    IdemProperties.Source s = c.getSource();
    if (s.getType() == null) {
      throw new IllegalArgumentException(at + ".source.type is required: kafka, kafka-share or rabbitmq");
    }
    switch (s.getType()) {
      case KAFKA, KAFKA_SHARE -> {
        rejectSet(at, "rabbitmq", s.getUri(), "uri", s.getQueue(), "queue", s.getDeadLetterExchange(), "dead-letter-exchange",
            s.getDeadLetterRoutingKey(), "dead-letter-routing-key", s.getDeadLetterMode(), "dead-letter-mode");
        boolean share = s.getType() == IdemProperties.SourceType.KAFKA_SHARE;
        if (share) {
          rejectSet(at, "kafka", s.getEngine(), "engine");
          if (c.getOrdering() != Ordering.UNORDERED) {
            throw new IllegalArgumentException(
                at + ".ordering is " + c.getOrdering() + ", but a kafka-share source keeps no order"
                    + " (a share group hands a partition's records to several consumers at once): set " + at
                    + ".ordering to unordered");
          }
        } else {
          rejectSet(at, "kafka-share", s.getShareConsumers(), "share-consumers");
        }
        requireOnClassPath(at, share ? "kafka-share" : "kafka",
            share ? "dev.idem.kafka.KafkaShareSource" : "dev.idem.kafka.KafkaSource",
            "dev.idem:idem-kafka");
        String bootstrap = s.getBootstrapServers() != null
            ? s.getBootstrapServers()
            : environment.getProperty("spring.kafka.bootstrap-servers");
        return KafkaSources.source(at, name, s, bootstrap, c.getPrefetch(), decoder, meterRegistry);
      }
      case RABBITMQ -> {
        rejectSet(at, "kafka", s.getBootstrapServers(), "bootstrap-servers", s.getTopics().isEmpty() ? null : s.getTopics(),
            "topics",
            s.getGroupId(), "group-id", s.getDeadLetterTopic(), "dead-letter-topic", s.getDeadLetterTopicSuffix(),
            "dead-letter-topic-suffix",
            s.getMessageIdHeader(), "message-id-header", s.getProperties().isEmpty() ? null : s.getProperties(), "properties",
            s.getEngine(), "engine", s.getShareConsumers(), "share-consumers");
        requireOnClassPath(at, "rabbitmq", "dev.idem.rabbit.RabbitSource", "dev.idem:idem-rabbit");
        return RabbitSources.source(at, s, c.getPrefetch(), decoder);
      }
      default -> throw new IllegalArgumentException(at + ".source.type " + s.getType() + " is not supported");
    }
  }

  private static void rejectSet(String at, String otherType, @Nullable Object... valuesAndNames) {
    for (int i = 0; i < valuesAndNames.length; i += 2) {
      if (valuesAndNames[i] != null) {
        throw new IllegalArgumentException(
            at + ".source." + valuesAndNames[i + 1] + " applies to source.type " + otherType + " only");
      }
    }
  }

  private static void requireOnClassPath(String at, String type, String className, String artifact) {
    if (!ClassUtils.isPresent(className, ConfiguredConsumers.class.getClassLoader())) {
      throw new IllegalArgumentException(at + ".source.type is " + type + ", which needs " + artifact + " on the class path");
    }
  }
}
