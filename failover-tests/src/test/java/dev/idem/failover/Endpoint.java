package dev.idem.failover;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.Delivery;
import dev.idem.kafka.DeadLetterHeaders;
import dev.idem.kafka.KafkaSource;
import dev.idem.kafka.KafkaSourceOptions;
import dev.idem.kafka.testing.KafkaService;
import dev.idem.kafka.testing.StrictUtf8Deserializer;
import dev.idem.kafka.testing.TestEngine;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSource;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.RabbitTopology;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.header.Header;
import org.awaitility.Awaitility;
import reactor.core.publisher.Flux;

/**
 * A switch lane's broker side: a RabbitMQ queue or a Kafka topic of its own, the source its
 * consumer reads, how the test publishes to it, and what the broker must hold once every message
 * settled. Closing it stops the source and removes what it created.
 */
interface Endpoint extends AutoCloseable {

  /** The brokers the switch tests run on. */
  enum Broker {
    RABBITMQ, KAFKA;

    /**
     * A new endpoint named {@code name} (the queue, or the topic with {@code name + "_group"}).
     *
     * @param name a unique name, also the consumer's
     * @return the endpoint, its source not yet subscribed
     */
    Endpoint open(String name) {
      return this == RABBITMQ ? new Rabbit(name) : new Kafka(name);
    }
  }

  /** A message to publish: its id (the {@code message-id}), its key (Kafka's partitioning) and body. */
  record Message(String id, String key, String body) {}

  /** The deliveries, for the consumer's {@code process}. */
  Flux<Delivery<String>> receive();

  /** Publishes, returning once the broker has accepted every message. */
  void publish(List<Message> messages);

  /**
   * Once every delivery has an outcome: nothing is left for the consumer (RabbitMQ: the queue is
   * empty; Kafka: the group's committed offsets reached the end of every partition), and the
   * dead-letter destination holds exactly {@code deadLettered}: one copy per DEAD_LETTERED outcome.
   */
  void assertSettled(String what, List<String> deadLettered);

  /** What the broker holds now, for a failed check's message (RabbitMQ: the queue's depth; Kafka: offsets per partition). */
  String describe();

  @Override
  void close();

  /** A classic queue with its dead-letter queue, and a {@link RabbitSource} on it. */
  final class Rabbit implements Endpoint {
    private final RabbitService rabbit = RabbitService.get();
    private final String queue;
    private final RabbitSource<String> source;

    Rabbit(String queue) {
      this.queue = queue;
      try {
        RabbitTopology.declare(rabbit.admin(), queue, RabbitTopology.QueueType.CLASSIC);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      this.source = RabbitSource.create(RabbitSourceOptions.builder(queue).uri(rabbit.uri())
          .connectionName(PostgresService.uniqueName("idem-failover")).build(), PayloadDecoder.utf8());
    }

    @Override
    public Flux<Delivery<String>> receive() {
      return source.receive();
    }

    @Override
    public void publish(List<Message> messages) {
      rabbit.publish(queue, messages.stream().map(m -> RabbitService.message(m.id(), m.body())).toList());
    }

    @Override
    public void assertSettled(String what, List<String> deadLettered) {
      assertThat(rabbit.messageCount(queue)).as(what + ": messages left on the queue").isZero();
      List<String> dead = rabbit.drain(RabbitTopology.deadLetterQueue(queue)).stream().map(r -> r.getProps().getMessageId())
          .toList();
      assertThat(dead).as(what + ": the dead-letter queue").hasSize(deadLettered.size())
          .containsExactlyInAnyOrderElementsOf(deadLettered);
    }

    @Override
    public String describe() {
      return "messages on the queue: " + rabbit.messageCount(queue);
    }

    @Override
    public void close() {
      try {
        source.close();
        RabbitTopology.delete(rabbit.admin(), queue);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /**
   * A topic of {@value #PARTITIONS} partitions with its {@code .DLT} topic, on the tests' broker
   * ({@link KafkaService}), and a {@link KafkaSource} that commits every 200 ms.
   */
  final class Kafka implements Endpoint {
    static final int PARTITIONS = 4;
    private final KafkaService kafka = KafkaService.get();
    private final String topic;
    private final String group;
    private final KafkaSource<String> source;
    private final KafkaProducer<byte[], byte[]> producer;

    Kafka(String topic) {
      this.topic = topic;
      this.group = topic + "_group";
      kafka.createTopic(topic, PARTITIONS);
      kafka.createTopic(topic + KafkaSourceOptions.DEFAULT_DEAD_LETTER_SUFFIX, 1);
      this.source = KafkaSource.create(TestEngine.apply(KafkaSourceOptions.<String>builder())
          .bootstrapServers(kafka.bootstrapServers()).groupId(group).topics(topic)
          .valueDeserializer(new StrictUtf8Deserializer())
          .commitInterval(Duration.ofMillis(200))
          .closeTimeout(Duration.ofSeconds(5))
          .build());
      this.producer = kafka.producer();
    }

    @Override
    public Flux<Delivery<String>> receive() {
      return source.receive();
    }

    @Override
    public void publish(List<Message> messages) {
      List<Future<?>> sent = new ArrayList<>();
      for (Message m : messages) {
        sent.add(producer.send(KafkaService.record(topic, null, m.key(), m.id(), m.body())));
      }
      producer.flush();
      try {
        for (Future<?> f : sent) {
          f.get(60, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      } catch (Exception e) {
        throw new IllegalStateException("could not publish to " + topic, e);
      }
    }

    @Override
    public void assertSettled(String what, List<String> deadLettered) {
      Awaitility.await(what + ": offsets committed to the end of " + topic).atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(250))
          .untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).as(what + ": committed offsets")
              .isEqualTo(kafka.endOffsets(topic)));
      List<String> dead = new ArrayList<>();
      for (ConsumerRecord<byte[], byte[]> r : kafka.readAll(topic + KafkaSourceOptions.DEFAULT_DEAD_LETTER_SUFFIX)) {
        Header id = r.headers().lastHeader(DeadLetterHeaders.MESSAGE_ID);
        dead.add(id == null ? null : new String(id.value(), StandardCharsets.UTF_8));
      }
      assertThat(dead).as(what + ": the dead-letter topic").hasSize(deadLettered.size())
          .containsExactlyInAnyOrderElementsOf(deadLettered);
    }

    @Override
    public String describe() {
      try {
        return "committed offsets " + kafka.committedOffsets(group, topic) + ", end offsets " + kafka.endOffsets(topic);
      } catch (RuntimeException e) {
        return "offsets unreadable: " + e;
      }
    }

    @Override
    public void close() {
      producer.close(Duration.ofSeconds(5));
      source.close();
      try {
        kafka.admin().deleteTopics(List.of(topic, topic + KafkaSourceOptions.DEFAULT_DEAD_LETTER_SUFFIX)).all().get(30,
            TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (Exception e) {
        System.err.println("could not delete topic " + topic + ": " + e);
      }
    }
  }
}
