package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.ConnectionFactoryOptions;
import java.io.IOException;
import org.junit.jupiter.api.Test;

/**
 * A failure to start the embedded PostgreSQL, whatever its kind, reaches the user with the hint
 * to pass {@code --postgres=...} instead; a multi-host failover URL passes through
 * {@code --postgres} whole.
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

    for (Throwable failure : new Throwable[]{linkage, io, runtime}) {
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

  @Test
  void aMultiHostFailoverUrlPassesThroughThePostgresFlagWholeAndTheDriverTakesIt() {
    // docs/operating.md, "PostgreSQL high availability": the URL that follows the primary through a switch.
    String url = "r2dbc:postgresql:failover://app@db1:5432,db2:5433/payments?targetServerType=primary";

    assertThat(DemoEnvironment.fromArgs("--postgres=" + url, "--events=100").postgresUrl()).isEqualTo(url);
    ConnectionFactoryOptions options = ConnectionFactoryOptions.parse(url);
    assertThat(options.getValue(ConnectionFactoryOptions.PROTOCOL)).isEqualTo("failover");
    assertThat(options.getValue(ConnectionFactoryOptions.HOST)).isEqualTo("db1:5432,db2:5433");
    assertThat(options.getValue(ConnectionFactoryOptions.DATABASE)).isEqualTo("payments");
    assertThat(ConnectionFactories.get(url).getMetadata().getName()).isEqualTo("PostgreSQL");
  }
}
