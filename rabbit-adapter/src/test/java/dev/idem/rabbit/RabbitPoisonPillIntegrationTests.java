package dev.idem.rabbit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.impl.LongStringHelper;
import dev.idem.Outcome;
import dev.idem.rabbit.internal.HeaderValues;
import dev.idem.rabbit.testing.RabbitService;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Poison pills that come from user code and from producers, on the real RabbitMQ and PostgreSQL:
 * decoders, id extractors and ordering-key rules that throw {@link Error}s, ids that are not text,
 * and the length of the adapter's log lines about them.
 */
class RabbitPoisonPillIntegrationTests {

  private static final Duration PATIENCE = Duration.ofSeconds(120);

  @Test
  void decoderStackOverflowErrorIsAnUndecodablePayloadDeadLetterAndTheChannelGoesOn() throws Exception {
    GetResponse deadLetter = poisonPill("rq_soe", (body, properties) -> {
      String text = new String(body, StandardCharsets.UTF_8);
      return text.equals("poison") ? Integer.toString(recurse(0)) : text;
    });
    assertThat(header(deadLetter, RabbitHeaders.ERROR_CLASS)).isEqualTo(StackOverflowError.class.getName());
  }

  @Test
  void decoderAssertionErrorIsAnUndecodablePayloadDeadLetterAndTheChannelGoesOn() throws Exception {
    GetResponse deadLetter = poisonPill("rq_assert", (body, properties) -> {
      String text = new String(body, StandardCharsets.UTF_8);
      if (text.equals("poison")) {
        throw new AssertionError("decoder invariant broken by '" + text + "'");
      }
      return text;
    });
    assertThat(header(deadLetter, RabbitHeaders.ERROR_CLASS)).isEqualTo(AssertionError.class.getName());
    assertThat(header(deadLetter, RabbitHeaders.ERROR_MESSAGE)).isEqualTo("decoder invariant broken by 'poison'");
  }

  /**
   * Ten good messages around one whose body makes the decoder throw: the poison ends in the
   * dead-letter queue as UNDECODABLE_PAYLOAD, every other message has one effect, and the first
   * channel was never lost.
   */
  private static GetResponse poisonPill(String prefix, PayloadDecoder<String> decoder) throws Exception {
    try (RabbitFixture f = new RabbitFixture(prefix, RabbitTopology.QueueType.CLASSIC)) {
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        messages.add(RabbitService.message("ok-" + i, "body-" + i));
      }
      messages.add(5, RabbitService.message("poison-id", "poison"));
      f.rabbit.publish(f.queue, messages);
      RabbitSource<String> source = f.source(f.options().prefetch(4).build(), decoder);
      f.run(source, f.consumer(f.recordingHandler()).build());

      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 1 && f.outcomes(Outcome.Status.PROCESSED) == 10);
      assertThat(source.sessions()).as("consumer sessions: the channel was never lost").isEqualTo(1);
      f.stopConsumers();
      assertThat(f.effectRows()).isEqualTo(10);
      assertThat(f.distinctEffects()).isEqualTo(10);
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      List<GetResponse> deadLetters = f.rabbit.drain(f.deadLetterQueue);
      assertThat(deadLetters).hasSize(1);
      GetResponse deadLetter = deadLetters.get(0);
      assertThat(deadLetter.getProps().getMessageId()).isEqualTo("poison-id");
      assertThat(new String(deadLetter.getBody(), StandardCharsets.UTF_8)).isEqualTo("poison");
      assertThat(header(deadLetter, RabbitHeaders.REASON)).isEqualTo("UNDECODABLE_PAYLOAD");
      return deadLetter;
    }
  }

  private static int recurse(int depth) {
    return recurse(depth + 1) + 1;
  }

  @Test
  void idExtractorAndOrderingKeyRuleThrowingErrorsDeadLetterOnlyTheirMessagesAndTheChannelGoesOn() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_usercode", RabbitTopology.QueueType.CLASSIC)) {
      List<RabbitService.Message> messages = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        messages.add(RabbitService.message("ok-" + i, "body-" + i));
      }
      messages.add(2, RabbitService.message("bad-extractor", "x"));
      messages.add(5, RabbitService.message("bad-key", "y"));
      f.rabbit.publish(f.queue, messages);
      RabbitSourceOptions options = f.options()
          .messageId((envelope, properties) -> {
            if ("bad-extractor".equals(properties.getMessageId())) {
              throw new AssertionError("extractor invariant broken");
            }
            return properties.getMessageId();
          })
          .orderingKey((envelope, properties) -> {
            if ("bad-key".equals(properties.getMessageId())) {
              throw new NoClassDefFoundError("com/example/MissingKeyClass");
            }
            return properties.getMessageId();
          })
          .build();
      RabbitSource<String> source = f.source(options);
      f.run(source, f.consumer(f.recordingHandler()).build());

      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 2 && f.outcomes(Outcome.Status.PROCESSED) == 6);
      assertThat(source.sessions()).as("consumer sessions: the channel was never lost").isEqualTo(1);
      f.stopConsumers();
      assertThat(f.distinctEffects()).isEqualTo(6);
      assertThat(f.effectRows()).isEqualTo(6);
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      Map<String, GetResponse> byId = byMessageId(f.rabbit.drain(f.deadLetterQueue));
      assertThat(byId).containsOnlyKeys("bad-extractor", "bad-key");

      GetResponse badExtractor = byId.get("bad-extractor");
      assertThat(header(badExtractor, RabbitHeaders.REASON)).isEqualTo("INVALID_ID");
      assertThat(header(badExtractor, RabbitHeaders.ERROR_CLASS)).isEqualTo(IllegalArgumentException.class.getName());
      assertThat(header(badExtractor, RabbitHeaders.ERROR_MESSAGE))
          .startsWith("the message id extractor (")
          .endsWith(") failed: java.lang.AssertionError: extractor invariant broken");

      GetResponse badKey = byId.get("bad-key");
      assertThat(header(badKey, RabbitHeaders.REASON)).isEqualTo("UNDECODABLE_PAYLOAD");
      assertThat(header(badKey, RabbitHeaders.ERROR_MESSAGE))
          .isEqualTo("the orderingKey rule failed: java.lang.NoClassDefFoundError: com/example/MissingKeyClass");
    }
  }

  @Test
  void headerIdsThatAreNotTextBytesOrIntegersOrNotUtf8AreInvalidIdDeadLettersNeverStringifiedOrMerged() throws Exception {
    try (RabbitFixture f = new RabbitFixture("rq_idtypes", RabbitTopology.QueueType.CLASSIC)) {
      // The message-id property only labels the messages; the id is the event-id header.
      publishWithHeader(f, "table", Map.of("k", "v"));
      publishWithHeader(f, "array", List.of("a", "b"));
      publishWithHeader(f, "double", 4.2d);
      // Two different byte strings that lenient decoding would both turn into "\uFFFDid".
      publishWithHeader(f, "bad-utf8-bytes", new byte[]{(byte) 0xFF, 'i', 'd'});
      publishWithHeader(f, "bad-utf8-longstr", LongStringHelper.asLongString(new byte[]{(byte) 0xFE, 'i', 'd'}));
      publishWithHeader(f, "long", 42L);
      publishWithHeader(f, "text", LongStringHelper.asLongString("e-1"));
      publishWithHeader(f, "bytes", "e-2".getBytes(StandardCharsets.UTF_8));
      RabbitSource<String> source = f.source(f.options().messageId(MessageIdExtractor.header("event-id")).build());
      f.run(source, f.consumer(f.recordingHandler()).build());

      await().atMost(PATIENCE)
          .until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 5 && f.outcomes(Outcome.Status.PROCESSED) == 3);
      f.stopConsumers();
      assertThat(f.outcomes(Outcome.Status.DUPLICATE)).isZero();
      assertThat(f.postgres.count("SELECT count(*) FROM " + f.effects + " WHERE message_id IN ('42', 'e-1', 'e-2')"))
          .isEqualTo(3);
      assertThat(f.effectRows()).isEqualTo(3);
      assertThat(f.rabbit.messageCount(f.queue)).isZero();

      Map<String, GetResponse> byLabel = byMessageId(f.rabbit.drain(f.deadLetterQueue));
      assertThat(byLabel).containsOnlyKeys("table", "array", "double", "bad-utf8-bytes", "bad-utf8-longstr");
      assertThat(byLabel.values()).allSatisfy(r -> {
        assertThat(header(r, RabbitHeaders.REASON)).isEqualTo("INVALID_ID");
        assertThat(header(r, RabbitHeaders.ERROR_CLASS)).isEqualTo(IllegalArgumentException.class.getName());
      });
      assertThat(header(byLabel.get("table"), RabbitHeaders.ERROR_MESSAGE))
          .startsWith("header 'event-id' holds a table (")
          .endsWith("), not text, bytes or an integer, so it cannot be a message id");
      assertThat(header(byLabel.get("array"), RabbitHeaders.ERROR_MESSAGE)).startsWith("header 'event-id' holds an array (");
      assertThat(header(byLabel.get("double"), RabbitHeaders.ERROR_MESSAGE))
          .startsWith("header 'event-id' holds a value of type java.lang.Double,");
      assertThat(header(byLabel.get("bad-utf8-bytes"), RabbitHeaders.ERROR_MESSAGE))
          .startsWith("header 'event-id' holds 3 bytes that are not valid UTF-8");
      assertThat(header(byLabel.get("bad-utf8-longstr"), RabbitHeaders.ERROR_MESSAGE))
          .startsWith("header 'event-id' holds 3 bytes that are not valid UTF-8");
    }
  }

  @Test
  void logLinesAboutAHugeIdAndItsFailingDeadLetterPublishAreBounded() throws Exception {
    ListAppender<ILoggingEvent> lines = new ListAppender<>();
    Logger adapterLog = (Logger) LoggerFactory.getLogger("dev.idem.rabbit");
    lines.start();
    adapterLog.addAppender(lines);
    try (RabbitFixture f = new RabbitFixture("rq_hugeid", RabbitTopology.QueueType.CLASSIC)) {
      String hugeId = "h".repeat(20_000) + "-end";
      publishWithHeader(f, "huge", LongStringHelper.asLongString(hugeId));
      // Nothing is bound to this routing key yet: the dead letter is returned, and its publish is
      // retried (and logged) until the test binds the dead-letter queue.
      String exchange = RabbitTopology.deadLetterExchange(f.queue);
      RabbitSource<String> source = f.source(f.options().messageId(MessageIdExtractor.header("event-id"))
          .deadLetterTo(exchange, "bound-later").build());
      f.run(source, f.consumer(f.recordingHandler()).build());

      await().atMost(PATIENCE)
          .until(() -> lines.list.stream().anyMatch(e -> e.getFormattedMessage().startsWith("Dead-letter publish of message")));
      try (Channel channel = f.rabbit.admin().createChannel()) {
        channel.queueBind(f.deadLetterQueue, exchange, "bound-later");
      }
      await().atMost(PATIENCE).until(() -> f.outcomes(Outcome.Status.DEAD_LETTERED) == 1);
      f.stopConsumers();
      assertThat(f.rabbit.messageCount(f.queue)).isZero();
      assertThat(f.effectRows()).isZero();
      List<GetResponse> deadLetters = f.rabbit.drain(f.deadLetterQueue);
      assertThat(deadLetters).singleElement().satisfies(r -> {
        assertThat(header(r, RabbitHeaders.REASON)).isEqualTo("INVALID_ID");
        assertThat(header(r, "event-id")).as("the dead letter keeps the whole id").isEqualTo(hugeId);
      });

      List<String> messages = lines.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
      assertThat(messages).filteredOn(m -> m.startsWith("Dead-letter publish of message")).isNotEmpty()
          .allSatisfy(m -> assertThat(m).contains("'" + "h".repeat(255) + "...("));
      assertThat(messages).allSatisfy(m -> {
        assertThat(m).doesNotContain("h".repeat(256));
        assertThat(m.length()).as("length of: " + m.substring(0, Math.min(200, m.length()))).isLessThan(2_000);
      });
    } finally {
      adapterLog.detachAppender(lines);
    }
  }

  private static void publishWithHeader(RabbitFixture f, String label, Object eventId) throws Exception {
    try (Channel channel = f.rabbit.admin().createChannel()) {
      channel.confirmSelect();
      AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
          .messageId(label).deliveryMode(2).headers(Map.of("event-id", eventId)).build();
      channel.basicPublish("", f.queue, true, props, ("body of " + label).getBytes(StandardCharsets.UTF_8));
      channel.waitForConfirmsOrDie(PATIENCE.toMillis());
    }
  }

  private static Map<String, GetResponse> byMessageId(List<GetResponse> responses) {
    return responses.stream().collect(Collectors.toMap(r -> r.getProps().getMessageId(), Function.identity()));
  }

  private static String header(GetResponse response, String name) {
    Map<String, Object> headers = response.getProps().getHeaders();
    return headers == null ? null : HeaderValues.render(headers.get(name));
  }
}
