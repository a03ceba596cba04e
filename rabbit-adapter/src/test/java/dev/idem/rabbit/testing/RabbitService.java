package dev.idem.rabbit.testing;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.GetResponse;
import dev.idem.testing.Ports;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Hands tests a real RabbitMQ, found in this order:
 * <ol>
 *   <li>the environment variable {@value #URI_ENV} (an AMQP URI such as
 *       {@code amqp://guest:guest@rabbit.example:5672});</li>
 *   <li>a broker listening on 127.0.0.1:5672 (user {@code guest}, password {@code guest});</li>
 *   <li>a Testcontainers {@code rabbitmq} container when a Docker engine is reachable.</li>
 * </ol>
 * When none is available, {@link #get()} throws an {@link IllegalStateException} that says how to
 * provide one: tests fail, they never skip.
 *
 * <p>Other suites may share the broker: helpers here touch only the queues and connections a
 * test names, never the whole broker.
 */
public final class RabbitService {

  /** Environment variable naming an AMQP URI of a RabbitMQ broker for tests. */
  public static final String URI_ENV = "IDEM_TEST_RABBIT_URI";
  /** The local broker tried when the environment variable is unset. */
  public static final String LOCAL_URI = "amqp://guest:guest@127.0.0.1:5672";

  private static volatile RabbitService instance;

  private final String uri;
  private final boolean local;
  private Connection admin;

  private RabbitService(String uri, boolean local) {
    this.uri = uri;
    this.local = local;
  }

  /**
   * The shared service, located on first use.
   *
   * @return the service
   * @throws IllegalStateException with instructions when no RabbitMQ can be found
   */
  public static RabbitService get() {
    RabbitService s = instance;
    if (s == null) {
      synchronized (RabbitService.class) {
        if (instance == null) {
          instance = locate();
        }
        s = instance;
      }
    }
    return s;
  }

  private static RabbitService locate() {
    String fromEnv = System.getenv(URI_ENV);
    if (fromEnv != null && !fromEnv.isBlank()) {
      return new RabbitService(fromEnv, false);
    }
    if (Ports.listening("127.0.0.1", 5672)) {
      return new RabbitService(LOCAL_URI, true);
    }
    String docker = TestcontainersRabbit.tryStart();
    if (docker != null) {
      return new RabbitService(docker, false);
    }
    throw new IllegalStateException("No RabbitMQ for the tests. Provide one of: (1) the environment variable "
        + URI_ENV + " with an AMQP URI, e.g. amqp://guest:guest@host:5672; "
        + "(2) a broker on 127.0.0.1:5672 with user guest/guest (on Debian: apt-get install rabbitmq-server "
        + "&& rabbitmq-server -detached); (3) a Docker engine for Testcontainers.");
  }

  /**
   * The broker URI.
   *
   * @return the URI with credentials
   */
  public String uri() {
    return uri;
  }

  /**
   * The broker's host.
   *
   * @return the host
   */
  public String host() {
    return URI.create(uri).getHost();
  }

  /**
   * The broker's AMQP port.
   *
   * @return the port
   */
  public int port() {
    int port = URI.create(uri).getPort();
    return port < 0 ? 5672 : port;
  }

  /**
   * The same URI pointed at another host and port (for example a {@code TcpProxy}).
   *
   * @param otherHost the host
   * @param otherPort the port
   * @return the URI
   */
  public String uriVia(String otherHost, int otherPort) {
    URI parsed = URI.create(uri);
    return parsed.getScheme() + "://" + parsed.getRawUserInfo() + "@" + otherHost + ":" + otherPort
        + (parsed.getRawPath() == null ? "" : parsed.getRawPath());
  }

  /**
   * A new connection with the client's automatic recovery off; the caller closes it.
   *
   * @param name the client-provided connection name
   * @return the connection
   */
  public Connection newConnection(String name) {
    try {
      ConnectionFactory factory = new ConnectionFactory();
      factory.setUri(uri);
      factory.setAutomaticRecoveryEnabled(false);
      return factory.newConnection(name);
    } catch (Exception e) {
      throw new IllegalStateException("cannot connect to RabbitMQ at " + uri.replaceFirst(":[^:@/]*@", ":****@"), e);
    }
  }

  /**
   * A connection for setup and assertions, shared by the tests of this JVM.
   *
   * @return the admin connection
   */
  public synchronized Connection admin() {
    if (admin == null || !admin.isOpen()) {
      admin = newConnection("idem-test-admin-" + ProcessHandle.current().pid());
    }
    return admin;
  }

  /**
   * A message to publish.
   *
   * @param messageId the AMQP message-id, or {@code null} for none
   * @param body the body as UTF-8 text
   * @return the message
   */
  public static Message message(String messageId, String body) {
    return new Message(messageId, body.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * A message to publish.
   *
   * @param messageId the AMQP message-id, or {@code null}
   * @param body the body
   */
  public record Message(String messageId, byte[] body) {}

  /**
   * Publishes persistent messages to a queue through the default exchange and waits for the
   * broker's confirms.
   *
   * @param queue the queue
   * @param messages the messages
   */
  public void publish(String queue, List<Message> messages) {
    try (Channel channel = admin().createChannel()) {
      channel.confirmSelect();
      for (Message m : messages) {
        AMQP.BasicProperties props = new AMQP.BasicProperties.Builder().messageId(m.messageId()).deliveryMode(2).build();
        channel.basicPublish("", queue, true, props, m.body());
      }
      channel.waitForConfirmsOrDie(120_000);
    } catch (IOException | TimeoutException e) {
      throw new IllegalStateException("publishing to " + queue + " failed", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /**
   * Ready messages in a queue (passive declare; unacknowledged ones are not counted).
   *
   * @param queue the queue
   * @return the count
   */
  public long messageCount(String queue) {
    try (Channel channel = admin().createChannel()) {
      return channel.queueDeclarePassive(queue).getMessageCount();
    } catch (IOException | TimeoutException e) {
      throw new IllegalStateException("passive declare of " + queue + " failed", e);
    }
  }

  /**
   * Consumers registered on a queue (passive declare).
   *
   * @param queue the queue
   * @return the count
   */
  public long consumerCount(String queue) {
    try (Channel channel = admin().createChannel()) {
      return channel.queueDeclarePassive(queue).getConsumerCount();
    } catch (IOException | TimeoutException e) {
      throw new IllegalStateException("passive declare of " + queue + " failed", e);
    }
  }

  /**
   * Takes every ready message off a queue with {@code basic.get} and acknowledges it.
   *
   * @param queue the queue
   * @return the messages, in queue order
   */
  public List<GetResponse> drain(String queue) {
    List<GetResponse> out = new ArrayList<>();
    try (Channel channel = admin().createChannel()) {
      GetResponse response;
      while ((response = channel.basicGet(queue, true)) != null) {
        out.add(response);
      }
      return out;
    } catch (IOException | TimeoutException e) {
      throw new IllegalStateException("basic.get on " + queue + " failed", e);
    }
  }

  /**
   * Peeks at every ready message of a queue ({@code basic.get} without ack; they are requeued
   * when the peeking channel closes).
   *
   * @param queue the queue
   * @return the messages
   */
  public List<GetResponse> peek(String queue) {
    List<GetResponse> out = new ArrayList<>();
    try (Channel channel = admin().createChannel()) {
      GetResponse response;
      while ((response = channel.basicGet(queue, false)) != null) {
        out.add(response);
      }
      return out;
    } catch (IOException | TimeoutException e) {
      throw new IllegalStateException("basic.get on " + queue + " failed", e);
    }
  }

  /**
   * Whether {@link #closeConnectionFromBroker} can work: the broker is the local one and
   * {@code rabbitmqctl} is installed.
   *
   * @return {@code true} when rabbitmqctl can close connections
   */
  public boolean canCloseConnectionsFromBroker() {
    return local
        && (new java.io.File("/usr/sbin/rabbitmqctl").canExecute() || new java.io.File("/usr/bin/rabbitmqctl").canExecute());
  }

  /**
   * Whether {@link #overrideBrokerSetting} can work: the broker is the local one and
   * {@code rabbitmqctl} is installed.
   *
   * @return {@code true} when rabbitmqctl can change the broker's settings
   */
  public boolean canChangeBrokerSettings() {
    return canCloseConnectionsFromBroker();
  }

  /**
   * Has the broker close the connections whose client-provided name is exactly {@code name}
   * ({@code rabbitmqctl close_connection}), leaving every other connection alone.
   *
   * @param name the unique connection name
   * @return how many connections were closed
   */
  public int closeConnectionFromBroker(String name) {
    String listing = run("rabbitmqctl", "-q", "list_connections", "pid", "client_properties");
    int closed = 0;
    for (String line : listing.split("\n")) {
      if (line.contains("\"" + name + "\"") || line.contains("<<\"" + name + "\">>")) {
        String pid = line.trim().split("\\s+")[0];
        run("rabbitmqctl", "-q", "close_connection", pid, "idem test: closed by the broker on purpose");
        closed++;
      }
    }
    return closed;
  }

  /**
   * The current value of a {@code rabbit} application setting on the local broker
   * ({@code rabbitmqctl eval 'application:get_env(rabbit, Key).'}).
   *
   * @param key the setting, e.g. {@code consumer_timeout}
   * @return the value as an Erlang term, or {@code null} when the setting is {@code undefined}
   */
  public String brokerSetting(String key) {
    String out = run("rabbitmqctl", "-q", "eval", "application:get_env(rabbit, " + atom(key) + ").").trim();
    if (out.equals("undefined")) {
      return null;
    }
    if (!out.startsWith("{ok,") || !out.endsWith("}")) {
      throw new IllegalStateException("unexpected answer to application:get_env(rabbit, " + key + "): " + out);
    }
    return out.substring("{ok,".length(), out.length() - 1).trim();
  }

  /**
   * Changes a {@code rabbit} application setting of the local broker at runtime and returns a
   * handle whose {@link BrokerSettingOverride#close()} puts back exactly the previous value (or
   * unsets it when it was {@code undefined}). The setting is node-wide: it reaches every user of
   * the broker, so keep the override short and close it in a {@code finally} (try-with-resources).
   *
   * @param key the setting, e.g. {@code consumer_timeout}
   * @param valueTerm the new value as an Erlang term, e.g. {@code 3000}
   * @return the override; close it to restore
   */
  public BrokerSettingOverride overrideBrokerSetting(String key, String valueTerm) {
    String previous = brokerSetting(key);
    run("rabbitmqctl", "-q", "eval", "application:set_env(rabbit, " + atom(key) + ", " + valueTerm + ").");
    return new BrokerSettingOverride(key, previous);
  }

  /** A runtime change of one broker setting; {@link #close()} restores the previous value once. */
  public final class BrokerSettingOverride implements AutoCloseable {
    private final String key;
    private final String previous;
    private boolean restored;

    private BrokerSettingOverride(String key, String previous) {
      this.key = key;
      this.previous = previous;
    }

    /**
     * The value before the override.
     *
     * @return the Erlang term, or {@code null} for {@code undefined}
     */
    public String previous() {
      return previous;
    }

    /** Restores the previous value, or unsets the setting when it was undefined; idempotent. */
    @Override
    public synchronized void close() {
      if (restored) {
        return;
      }
      if (previous == null) {
        run("rabbitmqctl", "-q", "eval", "application:unset_env(rabbit, " + atom(key) + ").");
      } else {
        run("rabbitmqctl", "-q", "eval", "application:set_env(rabbit, " + atom(key) + ", " + previous + ").");
      }
      restored = true;
    }
  }

  private static String atom(String key) {
    if (!key.matches("[a-z][a-z0-9_]*")) {
      throw new IllegalArgumentException("not a plain Erlang atom: " + key);
    }
    return key;
  }

  private static String run(String... command) {
    try {
      Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
      String out;
      try (InputStream in = process.getInputStream()) {
        out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      }
      if (!process.waitFor(120, TimeUnit.SECONDS) || process.exitValue() != 0) {
        throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
