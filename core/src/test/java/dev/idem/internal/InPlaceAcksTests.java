package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.AbstractDelivery;
import org.junit.jupiter.api.Test;

class InPlaceAcksTests {

  @Test
  void onlyAbstractDeliveryInstallsTheAccess() {
    InPlaceAcks.Access stranger = new InPlaceAcks.Access() {
      @Override
      public boolean acksInPlace(AbstractDelivery<?> delivery) {
        return true;
      }

      @Override
      public boolean ackInPlace(AbstractDelivery<?> delivery) {
        return true;
      }
    };

    assertThatThrownBy(() -> InPlaceAcks.install(stranger)).isInstanceOf(IllegalStateException.class)
        .hasMessage("only AbstractDelivery installs the access to acknowledgements in place");
  }
}
