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
    try {
      long replayed = replay(env);
      System.out.println("replayed " + replayed + " dead letter(s) from " + env.flag("dlt", env.flag("dlq", "")));
      System.exit(0);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
    }
  }

  /**
   * Replays the dead letters the flags select.
   *
   * @param env the flags and services
   * @return how many dead letters were replayed
   * @throws IllegalArgumentException when the flags name neither or both of {@code --dlt} and {@code --dlq}
   */
  public static long replay(DemoEnvironment env) {
    String id = env.flag("id", null);
    String reason = env.flag("reason", null);
    String dlt = env.flag("dlt", null);
    String dlq = env.flag("dlq", null);
    if ((dlt == null) == (dlq == null)) {
      throw new IllegalArgumentException(
          "usage: ReplayCommand (--kafka=BOOTSTRAP --dlt=TOPIC | --rabbit=AMQP_URI --dlq=QUEUE) [--id=MESSAGE_ID] [--reason=REASON]");
    }
    if (dlt != null) {
      return KafkaDeadLetterReplayer.create(env.kafkaBootstrap())
          .replay(dlt, r -> (id == null || id.equals(r.messageId())) && (reason == null || reason.equals(r.reason())));
    }
    try (RabbitDeadLetterReplayer replayer = RabbitDeadLetterReplayer.create(env.rabbitUri())) {
      return replayer.replay(dlq, m -> (id == null || id.equals(m.messageId())) && (reason == null || reason.equals(m.reason())))
          .blockOptional().orElse(0L);
    }
  }
}
