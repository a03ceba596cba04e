package dev.idem.examples.replay;

import dev.idem.examples.DemoEnvironment;
import dev.idem.kafka.KafkaDeadLetterReplayer;
import dev.idem.rabbit.RabbitDeadLetterReplayer;

/**
 * Replays dead letters to where they came from, keeping their message ids, so the dedup
 * contract still applies: a record that was already applied is recognised as a duplicate.
 *
 * <pre>
 * Kafka:    ... exec:java -Dexec.mainClass=dev.idem.examples.replay.ReplayCommand -Dexec.args="--kafka=host:9092 --dlt=payments.DLT [--id=payment-42] [--reason=RETRIES_EXHAUSTED]"
 * RabbitMQ: ... exec:java -Dexec.mainClass=dev.idem.examples.replay.ReplayCommand -Dexec.args="--rabbit=amqp://guest:guest@host:5672 --dlq=payments.dlq [--id=refund-7]"
 * </pre>
 *
 * Without {@code --id} or {@code --reason} every dead letter is replayed. Prints the count.
 */
public final class ReplayCommand {

  private ReplayCommand() {}

  /**
   * Runs the command.
   *
   * @param args the flags above
   */
  public static void main(String[] args) {
    DemoEnvironment env = DemoEnvironment.fromArgs(args);
    String id = env.flag("id", null);
    String reason = env.flag("reason", null);
    String dlt = env.flag("dlt", null);
    String dlq = env.flag("dlq", null);
    if ((dlt == null) == (dlq == null)) {
      System.err.println("usage: ReplayCommand (--kafka=BOOTSTRAP --dlt=TOPIC | --rabbit=AMQP_URI --dlq=QUEUE) [--id=MESSAGE_ID] [--reason=REASON]");
      System.exit(2);
    }
    long replayed;
    if (dlt != null) {
      replayed = KafkaDeadLetterReplayer.create(env.kafkaBootstrap())
          .replay(dlt, r -> (id == null || id.equals(r.messageId())) && (reason == null || reason.equals(r.reason())));
    } else {
      try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create(env.rabbitUri())) {
        replayed = replayer.replay(dlq, m -> (id == null || id.equals(m.messageId())) && (reason == null || reason.equals(m.reason())))
            .blockOptional().orElse(0L);
      }
    }
    System.out.println("replayed " + replayed + " dead letter(s) from " + (dlt != null ? dlt : dlq));
    System.exit(0);
  }
}
