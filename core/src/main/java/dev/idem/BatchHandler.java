package dev.idem;

import java.util.List;
import org.reactivestreams.Publisher;

/**
 * The user's business effect for a micro-batch of messages, for set-based SQL: one
 * {@code UPDATE ... FROM unnest($1::bigint[], $2::bigint[])} instead of one statement per
 * message.
 *
 * <p>It runs inside the batch's database transaction, after the dedup rows were inserted, and
 * receives only the messages seen for the first time, in delivery order. Everything it writes
 * commits or rolls back together with their dedup rows. When it fails, the pipeline rolls back
 * and splits the batch in halves until the failing message is alone; that one is then retried
 * and dead-lettered on its own (the handler is called with a list of one), the others commit.
 * Errors are classified as for {@link Handler}.
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface BatchHandler<T> {

  /**
   * Applies the effects of several messages.
   *
   * @param messages the new messages of the batch, in delivery order; never empty
   * @param tx the batch's transaction; {@link Tx#messageId()} is not available on it (use
   *     {@link BatchItem#messageId()})
   * @return a publisher that completes when the effects are written; its values are ignored
   */
  Publisher<?> handle(List<BatchItem<T>> messages, Tx tx);
}
