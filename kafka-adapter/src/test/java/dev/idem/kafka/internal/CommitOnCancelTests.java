package dev.idem.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.kafka.receiver.ReceiverOffset;
import reactor.test.publisher.TestPublisher;

/** Cancelling a consumer's records commits its acknowledged offsets first; close waits for that commit. */
class CommitOnCancelTests {

  /** An acknowledged offset whose commit completes when the test says so. */
  private static final class PendingCommitOffset implements ReceiverOffset {
    final Sinks.Empty<Void> commitDone = Sinks.empty();
    final AtomicInteger commits = new AtomicInteger();

    @Override
    public TopicPartition topicPartition() {
      return new TopicPartition("orders", 0);
    }

    @Override
    public long offset() {
      return 41;
    }

    @Override
    public void acknowledge() {
      // already acknowledged by the delivery
    }

    @Override
    public Mono<Void> commit() {
      return Mono.defer(() -> {
        commits.incrementAndGet();
        return commitDone.asMono();
      });
    }
  }

  @Test
  void cancellingCommitsTheAcknowledgedOffsetsBeforeCancellingTheConsumerAndCloseWaitsForTheCommit() throws Exception {
    CommitOnCancel commitOnCancel = new CommitOnCancel("g", Duration.ofSeconds(30));
    CommitOnCancel.Acked acked = new CommitOnCancel.Acked();
    PendingCommitOffset offset = new PendingCommitOffset();
    TestPublisher<String> records = TestPublisher.create();
    Disposable subscription = commitOnCancel.apply(records.flux(), acked).subscribe();
    acked.acknowledged(offset);

    subscription.dispose();

    assertThat(offset.commits.get()).isEqualTo(1);
    // The consumer stays subscribed (so it can commit) until the commit is answered.
    records.assertWasNotCancelled();
    CompletableFuture<Void> closing = CompletableFuture.runAsync(() -> commitOnCancel.awaitCommits(Duration.ofSeconds(30)));
    assertThat(closing).isNotDone();

    offset.commitDone.tryEmitEmpty();

    closing.get();
    records.assertCancelled();
  }

  @Test
  void withNothingAcknowledgedCancellingCancelsAtOnceAndCloseDoesNotWait() {
    CommitOnCancel commitOnCancel = new CommitOnCancel("g", Duration.ofSeconds(30));
    TestPublisher<String> records = TestPublisher.create();
    commitOnCancel.apply(records.flux(), new CommitOnCancel.Acked()).subscribe().dispose();

    records.assertCancelled();
    commitOnCancel.awaitCommits(Duration.ofSeconds(30));
  }

  @Test
  void aCommitThatFailsStillCancelsTheConsumer() {
    CommitOnCancel commitOnCancel = new CommitOnCancel("g", Duration.ofSeconds(30));
    CommitOnCancel.Acked acked = new CommitOnCancel.Acked();
    PendingCommitOffset offset = new PendingCommitOffset();
    TestPublisher<String> records = TestPublisher.create();
    Disposable subscription = commitOnCancel.apply(records.flux(), acked).subscribe();
    acked.acknowledged(offset);

    subscription.dispose();
    offset.commitDone.tryEmitError(new IllegalStateException("broker gone"));

    await().atMost(Duration.ofSeconds(30)).untilAsserted(records::assertCancelled);
    commitOnCancel.awaitCommits(Duration.ofSeconds(30));
  }
}
