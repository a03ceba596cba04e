package dev.idem.pipeline;

import dev.idem.ConsumerMetrics;
import dev.idem.Delivery;
import dev.idem.ErrorKind;
import dev.idem.RetryPolicy;
import dev.idem.internal.Backoff;
import dev.idem.internal.LogText;
import dev.idem.internal.StopControl;
import dev.idem.pipeline.PipelineFailures.BatchSplit;
import dev.idem.pipeline.PipelineFailures.EffectTimeout;
import dev.idem.pipeline.PipelineFailures.SlowEffect;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * The attempt counters of one message (or of one batch, counted on its first message) and the
 * decision after each failure: back off and retry, split the batch, or give up. Not thread-safe:
 * one per message or batch, used by its retry loop.
 */
final class RetryDecision {

  // The consumer's log category: operators and tests address the pipeline's messages by it.
  private static final Logger log = LoggerFactory.getLogger(Pipeline.LOG);

  private final String name;
  private final RetryPolicy retryPolicy;
  private final ConsumerMetrics metrics;
  private final Duration stuckWarningInterval;
  private final FailureKinds kinds;
  private final Delivery<?> delivery;
  private long firstFailureAt;
  private int attempts;
  private int retryableFailures;
  private int contentionInARow;
  private int infrastructureInARow;
  private long lastWarning;

  RetryDecision(ConsumerSettings<?> settings, FailureKinds kinds, Delivery<?> delivery) {
    this.name = settings.name();
    this.retryPolicy = settings.retryPolicy();
    this.metrics = settings.metrics();
    this.stuckWarningInterval = settings.stuckWarningInterval();
    this.kinds = kinds;
    this.delivery = delivery;
  }

  int next() {
    return ++attempts;
  }

  int count() {
    return attempts;
  }

  /**
   * Waits before the next attempt, or errors with {@code failure} to stop retrying. Retryable
   * failures count towards {@code maxAttempts} even across other kinds, so alternating
   * failure kinds cannot keep a message alive forever; a message the broker has delivered
   * {@code maxAttempts} times or more is not retried after a retryable failure.
   */
  Mono<Long> backoffOrGiveUp(Throwable failure) {
    ErrorKind kind = kinds.kindOf(failure);
    if (FailureKinds.isFatal(failure)) {
      return Mono.error(failure);
    }
    if (kind != ErrorKind.INFRASTRUCTURE) {
      infrastructureInARow = 0;
    }
    if (kind != ErrorKind.CONTENTION) {
      contentionInARow = 0;
    } else if (++contentionInARow > retryPolicy.maxContentionRetries()) {
      kind = ErrorKind.RETRYABLE;
    }
    Duration wait;
    switch (kind) {
      case INFRASTRUCTURE -> {
        warnWhileStuck(failure, infrastructureInARow++);
        wait = Backoff.jittered(retryPolicy.infrastructureBackoff(), retryPolicy.infrastructureMaxBackoff(),
            infrastructureInARow - 1);
      }
      case CONTENTION -> wait = Backoff.jittered(retryPolicy.firstBackoff(), retryPolicy.maxBackoff(), contentionInARow - 1);
      case RETRYABLE -> {
        if (++retryableFailures >= retryPolicy.maxAttempts()) {
          return Mono.error(failure);
        }
        if (deliveredTooOften()) {
          log.warn(
              "Consumer '{}': message '{}' failed on its delivery {} by the broker, which is maxAttempts ({}) or more: earlier"
                  + " deliveries already ran it, so it is not retried in memory again: {}",
              name, Settlement.idForLogs(delivery),
              delivery.deliveryAttempt(), retryPolicy.maxAttempts(), LogText.cut(FailureKinds.cause(failure).toString()));
          return Mono.error(failure);
        }
        wait = Backoff.jittered(retryPolicy.firstBackoff(), retryPolicy.maxBackoff(), retryableFailures - 1);
      }
      default -> {
        return Mono.error(failure);
      }
    }
    metrics.retrying(delivery, FailureKinds.cause(failure), kind);
    // A graceful stop abandons a message waiting here at once.
    return StopControl.backoff(wait);
  }

  /**
   * Whether the broker has delivered the message {@code maxAttempts} times or more (a share group's
   * or a quorum queue's delivery count; a redelivery flag says 2 at most): earlier deliveries ran
   * it, or crashed or timed out in it, so a retryable failure now ends its attempts instead of
   * starting {@code maxAttempts} more in memory. A crash loop then dead-letters it within about
   * {@code maxAttempts} deliveries, before a broker's own delivery limit drops it without a dead
   * letter.
   */
  private boolean deliveredTooOften() {
    try {
      return delivery.deliveryAttempt() >= retryPolicy.maxAttempts();
    } catch (RuntimeException e) {
      return false;
    }
  }

  /**
   * For a batch: waits and retries the whole batch on infrastructure failures and on
   * contention within its bound; anything else that is not fatal splits the batch, and so does a
   * timeout that struck while a handler ran, the client's ({@code transactionTimeout}) or the
   * server's ({@code statement_timeout}, {@code lock_timeout}): it is the running message's.
   */
  Mono<Long> backoffOrSplit(Throwable failure) {
    if (FailureKinds.isFatal(failure)) {
      return Mono.error(failure);
    }
    if (failure instanceof EffectTimeout || failure instanceof SlowEffect
        || FailureKinds.serverTimeoutOfEffect(failure) != null) {
      return Mono.error(new BatchSplit(failure));
    }
    ErrorKind kind = kinds.kindOf(failure);
    if (kind == ErrorKind.INFRASTRUCTURE
        || (kind == ErrorKind.CONTENTION && contentionInARow < retryPolicy.maxContentionRetries())) {
      return backoffOrGiveUp(failure);
    }
    return Mono.error(new BatchSplit(failure));
  }

  /**
   * WARN when a message starts waiting for infrastructure, then every {@code stuckWarningInterval}
   * while it waits; but one message per consumer per interval ({@link FailureKinds#claimInfrastructureWarning()}):
   * an outage fails every message in flight, and is logged once. The others log at DEBUG.
   */
  private void warnWhileStuck(Throwable failure, int retriesInARow) {
    long now = System.nanoTime();
    if (retriesInARow == 0) {
      firstFailureAt = now;
      lastWarning = now;
    }
    if (retriesInARow == 0 && kinds.claimInfrastructureWarning()) {
      log.warn(
          "Consumer '{}': infrastructure unavailable while processing message '{}'; backing off and retrying it, and every other "
              + "message that meets the outage (logged at DEBUG), until it is back: {}",
          name, Settlement.idForLogs(delivery), LogText.cut(FailureKinds.cause(failure).toString()));
    } else if (retriesInARow > 0 && now - lastWarning >= stuckWarningInterval.toNanos() && kinds.claimInfrastructureWarning()) {
      lastWarning = now;
      log.warn("Consumer '{}': message '{}' has been waiting for infrastructure for {} s ({} retries); it holds its slot "
          + "(and on Kafka its partition's commits) until the dependency is back: {}",
          name, Settlement.idForLogs(delivery), Duration.ofNanos(now - firstFailureAt).toSeconds(), retriesInARow + 1,
          LogText.cut(FailureKinds.cause(failure).toString()));
    } else {
      log.debug("Consumer '{}': still waiting for infrastructure for message '{}' (retry {}): {}",
          name, Settlement.idForLogs(delivery), retriesInARow + 1, LogText.cut(FailureKinds.cause(failure).toString()));
    }
  }
}
