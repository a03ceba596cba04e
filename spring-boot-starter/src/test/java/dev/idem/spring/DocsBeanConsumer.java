package dev.idem.spring;

import dev.idem.Handler;
import dev.idem.Ordering;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The consumer-as-a-bean snippet of docs/spring-boot.md, kept here so that it compiles with the
 * build (the docs-check module checks that the page's block equals the tagged region). No test
 * imports this configuration.
 */
@Configuration(proxyBeanMethods = false)
class DocsBeanConsumer {

  /** The handler type the snippet names. */
  interface AuditHandler extends Handler<String> {}

  // tag::bean-consumer[]
  @Bean
  IdemConsumerDefinition<String> audit(AuditHandler handler) {
    return IdemConsumerDefinition.<String>named("audit")
        .source(() -> {
          RabbitSource<String> rabbit = RabbitSource.create(RabbitSourceOptions.builder("audit").build(), PayloadDecoder.utf8());
          return ConsumerSource.of(rabbit::receive, rabbit);
        })
        .handler(handler)
        .configure(builder -> builder.concurrency(4).ordering(Ordering.UNORDERED))
        .build();
  }
  // end::bean-consumer[]
}
