package dev.idem.rabbit.testing;

import org.testcontainers.DockerClientFactory;
import org.testcontainers.rabbitmq.RabbitMQContainer;

/** Starts RabbitMQ in Docker when an engine is reachable; kept apart so its classes load only then. */
final class TestcontainersRabbit {

  private TestcontainersRabbit() {}

  /**
   * Starts a container if Docker is available.
   *
   * @return the AMQP URI of the container, or {@code null} without Docker
   */
  static String tryStart() {
    try {
      if (!DockerClientFactory.instance().isDockerAvailable()) {
        return null;
      }
    } catch (RuntimeException | LinkageError e) {
      return null;
    }
    RabbitMQContainer container = new RabbitMQContainer("rabbitmq:3.13-alpine");
    container.start();
    return "amqp://" + container.getAdminUsername() + ":" + container.getAdminPassword() + "@"
        + container.getHost() + ":" + container.getAmqpPort();
  }
}
