package dev.idem.spring;

import dev.idem.ConsumerMetrics;
import dev.idem.IdempotentConsumer;
import dev.idem.ServerTimeouts;
import dev.idem.TransactionRunner;
import dev.idem.postgres.PostgresInbox;
import dev.idem.spring.internal.ConfiguredConsumers;
import dev.idem.spring.internal.ConsumerTracker;
import io.micrometer.observation.ObservationRegistry;
import io.r2dbc.spi.ConnectionFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.transaction.reactive.TransactionalOperator;
import org.springframework.util.ClassUtils;

/**
 * Idem for a Spring Boot application with an R2DBC {@link ConnectionFactory} ({@code spring.r2dbc.*}).
 *
 * <p>Beans, each left out when the application defines its own of that type:
 * <ul>
 *   <li>{@link PostgresInbox} on the application's connection factory, table
 *       {@code idem.inbox.table} (default {@code processed_messages});</li>
 *   <li>{@link IdemConsumers}: the consumers of {@code idem.consumers.*} and of the
 *       {@link IdemConsumerDefinition} beans, each with its transactions on a
 *       {@link SpringTransactionRunner} (unless the application has a {@link TransactionRunner}
 *       bean, which then serves every consumer), the Micrometer meters of
 *       {@code dev.idem.micrometer.MicrometerConsumerMetrics} on the application's
 *       {@code MeterRegistry} when there is one, one Micrometer observation per message on the
 *       application's {@code ObservationRegistry} when there is one (tracing: the trace continues
 *       from the message's {@code traceparent} header), started and stopped with the context;</li>
 *   <li>with {@code spring-boot-health} on the class path, the health contributor {@code idem}
 *       with one {@link IdemHealthIndicator} per consumer ({@code /actuator/health/idem/<name>}).</li>
 * </ul>
 */
@AutoConfiguration(afterName = {
    "org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration",
    "org.springframework.boot.r2dbc.autoconfigure.R2dbcTransactionManagerAutoConfiguration"})
@ConditionalOnClass({ConnectionFactory.class, TransactionalOperator.class, IdempotentConsumer.class})
@ConditionalOnBean(ConnectionFactory.class)
@EnableConfigurationProperties(IdemProperties.class)
public class IdemAutoConfiguration {

  private static final String METER_REGISTRY = "io.micrometer.core.instrument.MeterRegistry";

  /** Created by Spring. */
  public IdemAutoConfiguration() {}

  /**
   * The inbox table on the application's connection factory.
   *
   * @param connectionFactory the application's connection factory
   * @param properties Idem's properties
   * @return the inbox
   */
  @Bean
  @ConditionalOnMissingBean
  public PostgresInbox idemInbox(ConnectionFactory connectionFactory, IdemProperties properties) {
    String table = properties.getInbox().getTable();
    try {
      return PostgresInbox.create(connectionFactory, table);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("idem.inbox.table (" + table + "): " + e.getMessage(), e);
    }
  }

  /**
   * The consumers and their lifecycle.
   *
   * @param properties Idem's properties
   * @param inbox the inbox
   * @param connectionFactory the application's connection factory
   * @param definitions consumers declared as beans
   * @param transactionRunner a transaction runner of the application's, if any
   * @param observationRegistry the application's observation registry, if any: one observation per message
   * @param beanFactory for handler and decoder beans, and the meter registry
   * @param environment for {@code spring.kafka.bootstrap-servers}
   * @return the consumers
   */
  @Bean
  @ConditionalOnMissingBean
  public IdemConsumers idemConsumers(IdemProperties properties, PostgresInbox inbox, ConnectionFactory connectionFactory,
      ObjectProvider<IdemConsumerDefinition<?>> definitions, ObjectProvider<TransactionRunner> transactionRunner,
      ObjectProvider<ObservationRegistry> observationRegistry, ConfigurableListableBeanFactory beanFactory,
      Environment environment) {
    Object meterRegistry = meterRegistry(beanFactory);
    List<IdemConsumerDefinition<?>> all = new ArrayList<>(
        ConfiguredConsumers.definitions(properties, beanFactory, environment, meterRegistry));
    definitions.orderedStream().forEach(all::add);
    TransactionRunner shared = transactionRunner.getIfAvailable();
    ObservationRegistry observations = observationRegistry.getIfAvailable();
    List<ManagedConsumer> consumers = new ArrayList<>();
    for (IdemConsumerDefinition<?> definition : all) {
      consumers.add(managed(definition, inbox, connectionFactory, shared, meterRegistry, observations));
    }
    return new IdemConsumers(consumers, inbox, properties.getInbox().isCreateSchema(), properties.isAutoStartup());
  }

  private static <T> ManagedConsumer managed(IdemConsumerDefinition<T> definition, PostgresInbox inbox,
      ConnectionFactory connectionFactory,
      @Nullable TransactionRunner shared, @Nullable Object meterRegistry, @Nullable ObservationRegistry observations) {
    TransactionRunner runner = shared != null
        ? shared
        : new SpringTransactionRunner(connectionFactory, ServerTimeouts.derivedFrom(definition.transactionTimeout()));
    ConsumerTracker tracker = new ConsumerTracker(
        meterRegistry != null ? Meters.metrics(meterRegistry, definition.name()) : ConsumerMetrics.NONE);
    IdempotentConsumer.Builder<T> builder = IdempotentConsumer.<T>named(definition.name())
        .inbox(inbox)
        .transactionRunner(runner)
        .transactionTimeout(definition.transactionTimeout())
        .metrics(tracker);
    if (observations != null) {
      builder.observationRegistry(observations);
    }
    IdempotentConsumer<T> consumer;
    try {
      consumer = definition.applyTo(builder).build();
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException("Invalid Idem consumer configuration for consumer '" + definition.name()
          + "' (idem.consumers." + definition.name() + ".* or its IdemConsumerDefinition): " + e.getMessage(), e);
    }
    return new ManagedConsumer(definition, consumer, tracker);
  }

  private static @Nullable Object meterRegistry(ConfigurableListableBeanFactory beanFactory) {
    if (!ClassUtils.isPresent(METER_REGISTRY, IdemAutoConfiguration.class.getClassLoader())) {
      return null;
    }
    return Meters.registry(beanFactory);
  }

  /** Micrometer, touched only when it is on the class path. */
  private static final class Meters {
    static @Nullable Object registry(ConfigurableListableBeanFactory beanFactory) {
      return beanFactory.getBeanProvider(io.micrometer.core.instrument.MeterRegistry.class).getIfAvailable();
    }

    static ConsumerMetrics metrics(Object registry, String consumer) {
      return new dev.idem.micrometer.MicrometerConsumerMetrics((io.micrometer.core.instrument.MeterRegistry) registry, consumer);
    }
  }

  /** The health contributor {@code idem}, when {@code spring-boot-health} is on the class path. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
  public static class IdemHealthConfiguration {

    /** Created by Spring. */
    public IdemHealthConfiguration() {}

    /**
     * One health indicator per consumer, under the contributor {@code idem}.
     *
     * @param consumers the consumers
     * @return the composite contributor
     */
    @Bean
    @ConditionalOnMissingBean(name = "idemHealthContributor")
    public CompositeHealthContributor idemHealthContributor(IdemConsumers consumers) {
      Map<String, HealthContributor> indicators = new LinkedHashMap<>();
      for (ManagedConsumer consumer : consumers.consumers()) {
        indicators.put(consumer.name(), new IdemHealthIndicator(consumer));
      }
      return CompositeHealthContributor.fromMap(indicators);
    }
  }
}
