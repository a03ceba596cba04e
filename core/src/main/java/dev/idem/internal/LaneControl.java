package dev.idem.internal;

import java.util.List;
import reactor.core.publisher.Mono;

/**
 * What a running batch may ask of its {@link BatchLanes} lane.
 *
 * @param <I> the item type
 * @param <O> the result type
 */
public interface LaneControl<I, O> {

  /**
   * Of these items of the running batch, those that may run now, in their order. The others
   * have the key of an item that runs off the lane: they leave this batch, wait for that item
   * to end, and run in a later batch of the lane, in their order.
   *
   * @param items items of the running batch
   * @return the items to run now
   */
  List<I> admit(List<I> items);

  /**
   * Runs {@code work} for an item of the running batch on its own, off the lane: its result
   * (or error) becomes the item's, and the batch must not emit one for it. Until the work
   * ends, the lane holds back the later items of the item's key; the lane goes on with the
   * other keys.
   *
   * @param item an item of the running batch
   * @param work what settles the item
   */
  void offLane(I item, Mono<O> work);
}
