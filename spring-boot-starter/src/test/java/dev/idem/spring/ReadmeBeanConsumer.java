package dev.idem.spring;

import dev.idem.Handler;
import dev.idem.Ordering;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The README's consumer-as-a-bean snippet, kept here so that it compiles with the build
 * ({@code ReadmeQuotesTests} in the examples module finds every README snippet in a source file).
 * No test imports this configuration.
 */
@Configuration(proxyBeanMethods = false)
class ReadmeBeanConsumer {

  /** The handler type the snippet names. */
  interface AuditHandler extends Handler<String> {}

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
}
