package dev.idem.bench;

import dev.idem.kafka.testing.EmbeddedKafkaBroker;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * A single-node KRaft broker ({@link EmbeddedKafkaBroker}, from Kafka's own jars) in its own JVM,
 * so that the benchmark measures the consumer's CPU alone. Writes its bootstrap servers to the
 * file named by its argument once it is up, and stops (deleting its data) when its standard
 * input closes, which happens when the benchmark ends, however it ends.
 */
public final class KafkaBrokerMain {

  private KafkaBrokerMain() {}

  /**
   * Runs the broker.
   *
   * @param args the file to write the bootstrap servers to
   * @throws IOException when the file cannot be written
   */
  public static void main(String[] args) throws IOException {
    EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.create();
    Runtime.getRuntime().addShutdownHook(new Thread(broker::destroy, "bench-kafka-stop"));
    broker.start();
    Path target = Path.of(args[0]);
    Path temp = Files.createTempFile(target.getParent(), "bootstrap", ".tmp");
    Files.writeString(temp, broker.bootstrapServers(), StandardCharsets.UTF_8);
    Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
    while (System.in.read() >= 0) {
      // wait for the parent to close our standard input
    }
    System.exit(0);
  }
}
