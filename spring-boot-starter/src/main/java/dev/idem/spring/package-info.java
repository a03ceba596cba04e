/**
 * Idem's Spring Boot starter: {@link dev.idem.spring.IdemAutoConfiguration} runs the consumers
 * declared under {@code idem.consumers.*} ({@link dev.idem.spring.IdemProperties}) or as
 * {@link dev.idem.spring.IdemConsumerDefinition} beans, with their transactions on Spring's
 * ({@link dev.idem.spring.SpringTransactionRunner}), their lifecycle in
 * {@link dev.idem.spring.IdemConsumers} and a health indicator per consumer.
 */
@NullMarked
package dev.idem.spring;

import org.jspecify.annotations.NullMarked;
