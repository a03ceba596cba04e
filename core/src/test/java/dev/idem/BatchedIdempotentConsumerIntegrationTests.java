package dev.idem;

/** The core contract tests again, with micro-batched transactions of up to 16 messages. */
class BatchedIdempotentConsumerIntegrationTests extends IdempotentConsumerIntegrationTests {

  @Override
  int maxBatchSize() {
    return 16;
  }
}
