package dev.idem.internal;

import dev.idem.AbstractDelivery;
import dev.idem.Delivery;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * The pipeline's way to {@link AbstractDelivery}'s acknowledgement in place, which is not API:
 * {@code AbstractDelivery} installs the one {@link Access} when its class is initialized, so it is
 * in place before any delivery of that class exists.
 */
public final class InPlaceAcks {

  /** What {@link AbstractDelivery} lends the pipeline. */
  public interface Access {

    /**
     * Whether the delivery's adapter acknowledges in place.
     *
     * @param delivery an adapter's delivery
     * @return {@code true} when it does
     */
    boolean acksInPlace(AbstractDelivery<?> delivery);

    /**
     * Acknowledges in place, once only (see {@code AbstractDelivery}).
     *
     * @param delivery an adapter's delivery that acknowledges in place
     * @return {@code true} when this call acknowledged the message
     */
    boolean ackInPlace(AbstractDelivery<?> delivery);
  }

  private static volatile @Nullable Access access;

  private InPlaceAcks() {}

  /**
   * Installs the access; once, and only from {@link AbstractDelivery}.
   *
   * @param installed {@code AbstractDelivery}'s
   * @throws IllegalStateException when called from another class, or when one is installed already
   */
  public static synchronized void install(Access installed) {
    if (StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).getCallerClass() != AbstractDelivery.class) {
      throw new IllegalStateException("only AbstractDelivery installs the access to acknowledgements in place");
    }
    if (access != null) {
      throw new IllegalStateException("the access to acknowledgements in place is installed already");
    }
    access = installed;
  }

  /**
   * Whether {@code delivery} acknowledges in place.
   *
   * @param delivery any delivery
   * @return {@code true} for an {@link AbstractDelivery} whose adapter acknowledges in place
   */
  public static boolean acksInPlace(Delivery<?> delivery) {
    return delivery instanceof AbstractDelivery<?> adapted && Objects.requireNonNull(access).acksInPlace(adapted);
  }

  /**
   * Acknowledges {@code delivery} in place, once only.
   *
   * @param delivery a delivery for which {@link #acksInPlace(Delivery)} is {@code true}
   * @return {@code true} when this call acknowledged the message; {@code false} when another
   *     settlement started first
   */
  public static boolean ackInPlace(AbstractDelivery<?> delivery) {
    return Objects.requireNonNull(access).ackInPlace(delivery);
  }
}
