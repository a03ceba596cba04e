package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import org.junit.jupiter.api.Test;

/**
 * A failure to start the embedded PostgreSQL, whatever its kind, reaches the user with the hint
 * to pass {@code --postgres=...} instead.
 */
class DemoEnvironmentTests {

  @Test
  void aLinkageErrorFromAMismatchedClasspathIsReportedWithTheHint() {
    // What commons-compress 1.28.0 threw on commons-io 2.14.0, and exec:java misreported as
    // "The specified mainClass doesn't contain a main method".
    NoSuchMethodError mismatch = new NoSuchMethodError(
        "'java.nio.file.attribute.FileTime org.apache.commons.io.file.attribute.FileTimes.fromUnixTime(long)'");

    assertThatThrownBy(() -> DemoEnvironment.startEmbedded(() -> {
      throw mismatch;
    }))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("Could not start the embedded PostgreSQL")
        .hasMessageContaining("FileTimes.fromUnixTime")
        .hasMessageContaining("pass --postgres=r2dbc:postgresql://")
        .hasMessageContaining(DemoEnvironment.POSTGRES_ENV)
        .hasCause(mismatch);
  }

  @Test
  void otherLinkageErrorsAndExceptionsAreReportedWithTheHint() {
    LinkageError linkage = new NoClassDefFoundError("org/apache/commons/compress/archivers/tar/TarArchiveInputStream");
    IOException io = new IOException("no space left on device");
    IllegalArgumentException runtime = new IllegalArgumentException("unsupported platform");

    for (Throwable failure : new Throwable[] {linkage, io, runtime}) {
      assertThatThrownBy(() -> DemoEnvironment.startEmbedded(() -> {
        if (failure instanceof Exception exception) {
          throw exception;
        }
        throw (Error) failure;
      }))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("pass --postgres=r2dbc:postgresql://")
          .hasCause(failure);
    }
  }

  @Test
  void virtualMachineErrorsPassThroughUnchanged() {
    OutOfMemoryError oom = new OutOfMemoryError("Java heap space");

    assertThatThrownBy(() -> DemoEnvironment.startEmbedded(() -> {
      throw oom;
    })).isSameAs(oom);
  }

  @Test
  void aStartedServerIsReturned() {
    assertThat(DemoEnvironment.startEmbedded(() -> "started")).isEqualTo("started");
  }
}
