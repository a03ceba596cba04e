package dev.idem.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.IdempotentConsumer;
import org.junit.jupiter.api.Test;

class PipelineTests {

  @Test
  void thePipelineLogsUnderTheFacadesName() {
    assertThat(Pipeline.LOG).as("the category users configure").isEqualTo(IdempotentConsumer.class.getName());
  }
}
