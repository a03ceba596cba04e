package dev.idem;

/**
 * The default {@code maxBatchSize} of a consumer that does not set its own: the system property
 * {@value IdempotentConsumer#MAX_BATCH_SIZE_PROPERTY} when it is set, else
 * {@link IdempotentConsumer#DEFAULT_MAX_BATCH_SIZE}. A value that is not a whole number of at
 * least 1 fails with a message naming the property.
 */
final class BatchSizeDefault {

  private BatchSizeDefault() {}

  static int fromSystemProperty() {
    String value = System.getProperty(IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY);
    if (value == null || value.isBlank()) {
      return IdempotentConsumer.DEFAULT_MAX_BATCH_SIZE;
    }
    try {
      int size = Integer.parseInt(value.trim());
      if (size >= 1) {
        return size;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException("system property " + IdempotentConsumer.MAX_BATCH_SIZE_PROPERTY
        + " must be a whole number of at least 1, was '" + value + "'");
  }
}
