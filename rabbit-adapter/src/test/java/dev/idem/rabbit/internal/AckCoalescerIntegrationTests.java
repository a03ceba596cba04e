package dev.idem.rabbit.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;
import dev.idem.Delivery;
import dev.idem.rabbit.PayloadDecoder;
import dev.idem.rabbit.RabbitSourceOptions;
import dev.idem.rabbit.testing.RabbitService;
import dev.idem.testing.PostgresService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * {@link AckCoalescer} against the real broker: acks asked for together, or held above a delivery
 * not yet settled until it is, go out as one multiple ack; held acks go out one frame each past
 * their bounds or on a flush; and a multiple ack never covers a delivery that was not asked to be
 * acknowledged (what the broker requeues when the channel closes shows it).
 */
class AckCoalescerIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final int MESSAGES = 100;
  private static final Duration SHORT_HOLD = Duration.ofMillis(200);

  private final RabbitService rabbit = RabbitService.get();
  private final List<Disposable> running = new ArrayList<>();
  private String queue;
  private RabbitReceiver<String> receiver;
  private Scheduler settling;
  private AckCoalescer acks;

  @BeforeEach
  void setUp() throws Exception {
    queue = PostgresService.uniqueName("coalesce");
    try (Channel channel = rabbit.admin().createChannel()) {
      channel.queueDeclare(queue, true, false, false, null);
    }
    rabbit.publish(queue, IntStream.range(0, MESSAGES).mapToObj(i -> RabbitService.message("m-" + i, "body-" + i)).toList());
    receiver = new RabbitReceiver<>(RabbitSourceOptions.builder(queue).uri(rabbit.uri()).prefetch(MESSAGES)
        .connectionName(PostgresService.uniqueName("coalesce-conn")).build(), PayloadDecoder.utf8());
    settling = Schedulers.newSingle("test-settling");
    acks = new AckCoalescer(settling, MESSAGES, Duration.ofMinutes(5));
  }

  @AfterEach
  void tearDown() throws Exception {
    running.forEach(Disposable::dispose);
    receiver.close();
    settling.dispose();
    try (Channel channel = rabbit.admin().createChannel()) {
      channel.queueDelete(queue);
    }
  }

  @Test
  void acksAskedForTogetherGoOutAsOneMultipleAck() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();

    ackWhileTheSettlingThreadIsBusy(deliveries);

    assertThat(acks.frames()).as("basic.ack frames").isEqualTo(1);
    assertThat(acks.acks()).isEqualTo(MESSAGES);
    assertThat(requeuedAfterClose()).as("messages the broker took back").isEmpty();
  }

  @Test
  void acksAboveAnUnsettledDeliveryAreHeldAndGoOutWithItAsOneMultipleAck() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();

    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, 10));
    assertThat(acks.frames()).as("held: m-0 is not settled").isZero();
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(0, 1));
    assertThat(acks.frames()).as("one multiple ack for m-0..m-9").isEqualTo(1);
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(10, MESSAGES));

    assertThat(acks.frames()).as("then one for m-10..m-99").isEqualTo(2);
    assertThat(acks.acks()).isEqualTo(MESSAGES);
    assertThat(requeuedAfterClose()).isEmpty();
  }

  @Test
  void aHeldBackLowestDeliveryIsNeverCoveredByTheOthersAcks() throws Exception {
    acks = new AckCoalescer(settling, MESSAGES, SHORT_HOLD);
    List<RabbitDelivery<String>> deliveries = receiveAll();

    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, MESSAGES));

    await().atMost(TIMEOUT).untilAsserted(() -> assertThat(acks.frames())
        .as("once held for maxHold, one frame each: none of them is the lowest outstanding").isEqualTo(MESSAGES - 1));
    assertThat(requeuedAfterClose()).containsExactly("m-0");
  }

  @Test
  void aGapSplitsTheAcksIntoOneMultipleAckBelowItAndSingleAcksAboveItOnceHeldLongEnough() throws Exception {
    acks = new AckCoalescer(settling, MESSAGES, SHORT_HOLD);
    List<RabbitDelivery<String>> deliveries = receiveAll();
    List<RabbitDelivery<String>> asked = new ArrayList<>(deliveries);
    asked.remove(50);
    // Asked in any order: the coalescer sorts them by tag.
    Collections.reverse(asked);

    ackWhileTheSettlingThreadIsBusy(asked);

    await().atMost(TIMEOUT).untilAsserted(() -> assertThat(acks.frames())
        .as("one multiple ack for m-0..m-49, one each for m-51..m-99").isEqualTo(1 + 49));
    assertThat(requeuedAfterClose()).containsExactly("m-50");
  }

  @Test
  void aChannelHoldsAtMostMaxHeldAcksAndSendsTheRestOneFrameEach() throws Exception {
    acks = new AckCoalescer(settling, 10, Duration.ofMinutes(5));
    List<RabbitDelivery<String>> deliveries = receiveAll();

    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, 6));
    assertThat(acks.frames()).as("5 held, below maxHeld").isZero();
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(6, 11));

    assertThat(acks.frames()).as("10 held: they go out one frame each").isEqualTo(10);
    assertThat(requeuedAfterClose()).as("m-0 and what was never acked").hasSize(MESSAGES - 10).contains("m-0");
  }

  @Test
  void flushSendsTheHeldAcksBeforeTheChannelCloses() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, MESSAGES));
    assertThat(acks.frames()).isZero();

    acks.flush(deliveries.get(0).session()).block(TIMEOUT);

    assertThat(acks.frames()).as("one frame each: m-0 is still outstanding").isEqualTo(MESSAGES - 1);
    assertThat(requeuedAfterClose()).containsExactly("m-0");
  }

  @Test
  void heldAcksOfAChannelThatClosedAreDroppedAndTheBrokerRedeliversTheirMessages() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, MESSAGES));
    ConsumerSession session = deliveries.get(0).session();
    session.channel().close();

    acks.flush(session).block(TIMEOUT);

    assertThat(acks.frames()).isZero();
    assertThat(session.unsettled()).as("a closed channel counts nothing").isZero();
    assertThat(requeuedAfterClose()).hasSize(MESSAGES);
  }

  @Test
  void aRejectBelowTheHeldAcksLetsThemGoOutAsOneMultipleAck() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();
    ackWhileTheSettlingThreadIsBusy(deliveries.subList(1, MESSAGES));
    ConsumerSession session = deliveries.get(0).session();

    Mono.fromRunnable(() -> {
      try {
        session.channel().basicReject(deliveries.get(0).envelope().getDeliveryTag(), false);
      } catch (java.io.IOException e) {
        throw new IllegalStateException(e);
      }
      session.settled(deliveries.get(0).envelope().getDeliveryTag());
      acks.settledOtherwise(session);
    }).subscribeOn(settling).block(TIMEOUT);

    assertThat(acks.frames()).as("one multiple ack for m-1..m-99").isEqualTo(1);
    assertThat(requeuedAfterClose()).as("m-0 was rejected without requeue").isEmpty();
  }

  @Test
  void acksOnAClosedChannelFailAndTheBrokerRedeliversTheirMessages() throws Exception {
    List<RabbitDelivery<String>> deliveries = receiveAll();
    deliveries.get(0).session().channel().close();

    List<Throwable> failures = new CopyOnWriteArrayList<>();
    Flux.fromIterable(deliveries).flatMap(d -> acks.ack(d).doOnError(failures::add).onErrorResume(e -> Mono.empty()))
        .then().block(TIMEOUT);

    assertThat(failures).hasSize(MESSAGES).allSatisfy(e -> assertThat(e).isInstanceOf(SettlementException.class)
        .hasMessageContaining("its channel is gone"));
    assertThat(acks.frames()).isZero();
    receiver.close();
    await().atMost(TIMEOUT).untilAsserted(() -> assertThat(rabbit.messageCount(queue)).isEqualTo(MESSAGES));
  }

  /** Every message of the queue, received on one channel, none settled. */
  private List<RabbitDelivery<String>> receiveAll() {
    List<Delivery<String>> received = new CopyOnWriteArrayList<>();
    running.add(receiver.receive().subscribe(received::add));
    await().atMost(TIMEOUT).until(() -> received.size() == MESSAGES);
    List<RabbitDelivery<String>> deliveries = new ArrayList<>();
    received.forEach(d -> deliveries.add((RabbitDelivery<String>) d));
    return deliveries;
  }

  /** Asks for every ack while the settling thread is held, then lets it go and waits for all of them. */
  private void ackWhileTheSettlingThreadIsBusy(List<RabbitDelivery<String>> deliveries) throws InterruptedException {
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    settling.schedule(() -> {
      held.countDown();
      try {
        release.await(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    assertThat(held.await(TIMEOUT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    List<Mono<Void>> all = new ArrayList<>();
    for (RabbitDelivery<String> d : deliveries) {
      Mono<Void> ack = acks.ack(d).cache();
      ack.subscribe(ignored -> {}, error -> {});
      all.add(ack);
    }
    release.countDown();
    Mono.when(all).block(TIMEOUT);
  }

  /**
   * Closes the receiver (its channel): the broker requeues what was not acknowledged when the
   * channel's consumer is gone; their ids.
   */
  private List<String> requeuedAfterClose() {
    receiver.close();
    await().atMost(TIMEOUT).until(() -> rabbit.consumerCount(queue) == 0);
    List<String> ids = new ArrayList<>();
    for (GetResponse response : rabbit.drain(queue)) {
      ids.add(response.getProps().getMessageId());
    }
    Collections.sort(ids);
    return ids;
  }
}
