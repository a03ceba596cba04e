package dev.idem.spring.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.IdempotentConsumer;
import dev.idem.rabbit.DeadLetterMode;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.spring.IdemProperties;
import org.junit.jupiter.api.Test;

/** How a configured RabbitMQ source's options follow from the consumer's properties. */
class RabbitSourcesTests {

  private static final String AT = "idem.consumers.orders";

  private static IdemProperties.Source queue(String name) {
    IdemProperties.Source source = new IdemProperties.Source();
    source.setQueue(name);
    return source;
  }

  @Test
  void theWindowIsTwiceThePrefetchSoHeldAcksLeaveThePipelineItsRoom() {
    assertThat(RabbitSources.options(AT, queue("orders.q"), 16).prefetch()).isEqualTo(32);
    assertThat(RabbitSources.options(AT, queue("orders.q"), IdempotentConsumer.DEFAULT_PREFETCH).prefetch())
        .isEqualTo(RabbitSourceOptions.DEFAULT_PREFETCH);
  }

  @Test
  void theWindowStopsAtTheLargestPrefetchRabbitMqAccepts() {
    assertThat(RabbitSources.options(AT, queue("orders.q"), RabbitSourceOptions.MAX_PREFETCH).prefetch())
        .isEqualTo(RabbitSourceOptions.MAX_PREFETCH);
  }

  @Test
  void aMissingQueueAndAnUnknownDeadLetterModeAreRefusedNamingTheProperty() {
    assertThatThrownBy(() -> RabbitSources.options(AT, queue(" "), 16))
        .isInstanceOf(IllegalArgumentException.class).hasMessage(AT + ".source.queue is required");
    IdemProperties.Source source = queue("orders.q");
    source.setDeadLetterMode("drop");
    assertThatThrownBy(() -> RabbitSources.options(AT, source, 16))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(AT + ".source.dead-letter-mode")
        .hasMessageContaining("drop");
  }

  @Test
  void aDeadLetterModeIsReadWithDashesInAnyCase() {
    IdemProperties.Source source = queue("orders.q");
    source.setDeadLetterMode("Reject-To-Queue-DLX");
    assertThat(RabbitSources.options(AT, source, 16).deadLetterMode()).isEqualTo(DeadLetterMode.REJECT_TO_QUEUE_DLX);
  }
}
