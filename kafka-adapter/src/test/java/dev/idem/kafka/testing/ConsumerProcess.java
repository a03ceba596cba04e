package dev.idem.kafka.testing;

import dev.idem.IdempotentConsumer;
import dev.idem.Ordering;
import dev.idem.kafka.KafkaShareSource;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.postgres.PostgresConnections;
import dev.idem.postgres.PostgresInbox;
import io.r2dbc.pool.ConnectionPool;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * A consumer in a separate JVM that a test can kill with SIGKILL: it consumes a topic into a
 * business table ({@code message_id, payload}) through {@link IdempotentConsumer} until it is
 * killed. {@link #start} launches it on a consumer group, {@link #startShare} on a share group,
 * both with this JVM's class path.
 */
public final class ConsumerProcess {

  private static final String SHARE = "share";

  private ConsumerProcess() {}

  /**
   * Launches the consumer process.
   *
   * @param bootstrapServers the broker
   * @param topic the topic
   * @param group the consumer group
   * @param consumer the consumer name
   * @param table the business table
   * @param postgresUrl the R2DBC URL of the database
   * @param log where the process writes its output
   * @param maxBatchSize the consumer's micro-batch size (1: per-message transactions)
   * @return the running process
   */
  public static Process start(String bootstrapServers, String topic, String group, String consumer, String table,
      String postgresUrl, Path log, int maxBatchSize) {
    return launch(List.of(bootstrapServers, topic, group, consumer, table, postgresUrl, Integer.toString(maxBatchSize)), log);
  }

  /**
   * Launches a consumer process on a share group ({@link KafkaShareSource}, one share consumer).
   * Its handler writes {@code <tag>:<delivery attempt>} as the payload, so that a test can tell
   * which process applied a message, and on which delivery.
   *
   * @param bootstrapServers the broker
   * @param topic the topic
   * @param group the share group
   * @param consumer the consumer name (the same in every process of the test: the dedup rows are per consumer name)
   * @param table the business table
   * @param postgresUrl the R2DBC URL of the database
   * @param log where the process writes its output
   * @param maxBatchSize the consumer's micro-batch size
   * @param tag what this process writes into the payload column
   * @return the running process
   */
  public static Process startShare(String bootstrapServers, String topic, String group, String consumer, String table,
      String postgresUrl, Path log, int maxBatchSize, String tag) {
    return launch(
        List.of(bootstrapServers, topic, group, consumer, table, postgresUrl, Integer.toString(maxBatchSize), SHARE, tag),
        log);
  }

  private static Process launch(List<String> args, Path log) {
    String java = ProcessHandle.current().info().command().orElse("java");
    List<String> command = new ArrayList<>(List.of(java, "-Xmx256m", "-XX:TieredStopAtLevel=1"));
    // The child consumes on the engine and group protocol this JVM's tests run on.
    for (String property : List.of(TestEngine.PROPERTY, TestEngine.GROUP_PROTOCOL_PROPERTY)) {
      String value = System.getProperty(property);
      if (value != null) {
        command.add("-D" + property + "=" + value);
      }
    }
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), ConsumerProcess.class.getName()));
    command.addAll(args);
    try {
      File logFile = log.toFile();
      return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(logFile))
          .start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Runs the consumer until the process is killed.
   *
   * @param args bootstrap servers, topic, group, consumer name, table, R2DBC URL, maximum batch size,
   *     and for a share group {@code share} and the tag
   * @throws InterruptedException never in practice
   */
  public static void main(String[] args) throws InterruptedException {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    String name = args[3];
    String table = args[4];
    boolean share = args.length > 8 && args[7].equals(SHARE);
    String tag = share ? args[8] : null;
    ConnectionPool pool = PostgresConnections.pool(args[5], 4);
    IdempotentConsumer<String> consumer = IdempotentConsumer.<String>named(name)
        .inbox(PostgresInbox.create(pool))
        .handler((payload, tx) -> Mono.delay(Duration.ofMillis(5))
            .then(tx.sql("INSERT INTO " + table + " (message_id, payload) VALUES ($1, $2)")
                .bind(0, tx.messageId()).bind(1, share ? tag + ":" + tx.metadata().deliveryAttempt() : payload).execute()))
        .concurrency(4)
        .ordering(Ordering.UNORDERED)
        .maxBatchSize(Integer.parseInt(args[6]))
        .prefetch(128)
        .build();
    if (share) {
      KafkaShareSource<String> source = KafkaShareSource.create(KafkaSourceOptions.<String>builder().bootstrapServers(bootstrap)
          .groupId(group).topics(topic).valueDeserializer(new StrictUtf8Deserializer()).prefetch(128).build());
      Disposable running = consumer.process(source.receive()).subscribe();
      // SIGTERM stops gracefully (what is unsettled is released, acceptances committed); SIGKILL does not.
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        running.dispose();
        source.close();
      }));
      System.out.println("share consumer process " + tag + " started");
      Thread.currentThread().join();
    }
    KafkaSourceOptions.Builder<String> options = TestEngine.apply(KafkaSourceOptions.<String>builder())
        .bootstrapServers(bootstrap).groupId(group).topics(topic)
        .valueDeserializer(new StrictUtf8Deserializer())
        .commitInterval(Duration.ofMillis(200));
    if (!TestEngine.consumerGroupProtocol()) {
      // A killed member must leave the group quickly so that the restarted one gets its partitions.
      // (Kafka 4's consumer protocol refuses these client settings; the test broker sets its own.)
      options.consumerProperty("session.timeout.ms", 6000).consumerProperty("heartbeat.interval.ms", 1000);
    }
    KafkaSource<String> source = KafkaSource.create(options.build());
    consumer.process(source.receive()).subscribe();
    System.out.println("consumer process started");
    Thread.currentThread().join();
  }
}
