package dev.idem.testing;

import org.testcontainers.DockerClientFactory;
import org.testcontainers.postgresql.PostgreSQLContainer;

/** Starts PostgreSQL in Docker when an engine is reachable; kept apart so its classes load only then. */
final class TestcontainersPostgres {

  private TestcontainersPostgres() {}

  /**
   * Starts a container if Docker is available.
   *
   * @return the R2DBC URL of the container, or {@code null} without Docker
   */
  static String tryStart() {
    try {
      if (!DockerClientFactory.instance().isDockerAvailable()) {
        return null;
      }
    } catch (RuntimeException | LinkageError e) {
      return null;
    }
    PostgreSQLContainer container = new PostgreSQLContainer("postgres:16-alpine");
    container.start();
    return "r2dbc:postgresql://" + container.getUsername() + ":" + container.getPassword() + "@"
        + container.getHost() + ":" + container.getMappedPort(5432) + "/" + container.getDatabaseName();
  }
}
