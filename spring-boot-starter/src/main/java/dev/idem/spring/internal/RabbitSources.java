package dev.idem.spring.internal;

import dev.idem.rabbit.DeadLetterMode;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.spring.ConsumerSource;
import dev.idem.spring.IdemProperties;
import dev.idem.spring.MessageDecoder;
import java.util.Locale;
import java.util.function.Supplier;

/** RabbitMQ sources from configuration; loaded only when a consumer's source type is rabbitmq. */
final class RabbitSources {

  private RabbitSources() {}

  static Supplier<ConsumerSource<Object>> source(String at, IdemProperties.Source s, int prefetch,
      MessageDecoder<Object> decoder) {
    RabbitSourceOptions built = options(at, s, prefetch);
    PayloadDecoder<Object> payloads = (body, properties) -> decoder.decode(body);
    return () -> {
      RabbitSource<Object> rabbit = RabbitSource.create(built, payloads);
      return ConsumerSource.of(rabbit::receive, rabbit);
    };
  }

  /** The source's options from configuration: {@code basic.qos} twice the consumer's {@code prefetch}, at most {@link RabbitSourceOptions#MAX_PREFETCH}. */
  static RabbitSourceOptions options(String at, IdemProperties.Source s, int prefetch) {
    if (s.getQueue() == null || s.getQueue().isBlank()) {
      throw new IllegalArgumentException(at + ".source.queue is required");
    }
    // basic.qos twice the pipeline's prefetch, as RabbitSourceOptions' default: acks wait briefly to be coalesced.
    int qos = (int) Math.min(RabbitSourceOptions.MAX_PREFETCH, 2L * prefetch);
    RabbitSourceOptions.Builder options = RabbitSourceOptions.builder(s.getQueue()).prefetch(qos);
    if (s.getUri() != null) {
      options.uri(s.getUri());
    }
    if (s.getDeadLetterExchange() != null || s.getDeadLetterRoutingKey() != null) {
      options.deadLetterTo(
          s.getDeadLetterExchange() != null
              ? s.getDeadLetterExchange()
              : s.getQueue() + RabbitSourceOptions.DEFAULT_DEAD_LETTER_EXCHANGE_SUFFIX,
          s.getDeadLetterRoutingKey() != null ? s.getDeadLetterRoutingKey() : s.getQueue());
    }
    if (s.getDeadLetterMode() != null) {
      String mode = s.getDeadLetterMode().trim().toUpperCase(Locale.ROOT).replace('-', '_');
      try {
        options.deadLetterMode(DeadLetterMode.valueOf(mode));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(
            at + ".source.dead-letter-mode must be publish-with-confirms or reject-to-queue-dlx, was "
                + s.getDeadLetterMode(),
            e);
      }
    }
    return options.build();
  }
}
