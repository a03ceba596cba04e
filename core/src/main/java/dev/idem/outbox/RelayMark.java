package dev.idem.outbox;

import dev.idem.internal.Backoff;
import dev.idem.internal.LogText;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The mark step of an {@link OutboxRelay}'s round: in the round's transaction, marks the
 * confirmed rows {@code SENT} and records the failed ones (attempts, last error, next attempt
 * after a jittered backoff, {@code PARKED} at {@code maxAttempts}); after the commit, reports
 * them to the metrics and the log.
 */
final class RelayMark {

  private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);

  private final String name;
  private final String table;
  private final int batchSize;
  private final int maxAttempts;
  private final Duration firstBackoff;
  private final Duration maxBackoff;
  private final OutboxMetrics metrics;
  private final String markSentSql;
  private final String markFailedSql;

  RelayMark(String name, String table, int batchSize, int maxAttempts, Duration firstBackoff, Duration maxBackoff,
      OutboxMetrics metrics) {
    this.name = name;
    this.table = table;
    this.batchSize = batchSize;
    this.maxAttempts = maxAttempts;
    this.firstBackoff = firstBackoff;
    this.maxBackoff = maxBackoff;
    this.metrics = metrics;
    this.markSentSql = "UPDATE " + table + " SET status = 'SENT', sent_at = clock_timestamp(), attempts = attempts + 1"
        + " WHERE seq = ANY($1::bigint[])";
    this.markFailedSql = "UPDATE " + table + " AS t SET attempts = t.attempts + 1, last_error = f.error,"
        + " status = CASE WHEN t.attempts + 1 >= $4 THEN 'PARKED' ELSE 'PENDING' END,"
        + " parked_at = CASE WHEN t.attempts + 1 >= $4 THEN clock_timestamp() END,"
        + " next_attempt_at = clock_timestamp() + make_interval(secs => f.delay)"
        + " FROM unnest($1::bigint[], $2::text[], $3::float8[]) AS f(seq, error, delay) WHERE t.seq = f.seq";
  }

  /** The outcome of one committed round. */
  record Round(List<OutboxMessage> sent, int claimed, @Nullable Instant nextDue, boolean full) {}

  /** A failed publish attempt. */
  record Failure(OutboxMessage message, Throwable error, boolean parked) {}

  Mono<Round> mark(Connection connection, List<OutboxMessage> batch, Map<Long, Throwable> errors, List<Failure> failures) {
    List<OutboxMessage> sent = new ArrayList<>();
    List<Long> failedSeqs = new ArrayList<>();
    List<String> failedErrors = new ArrayList<>();
    List<Double> delays = new ArrayList<>();
    Instant nextDue = null;
    for (OutboxMessage message : batch) {
      Throwable error = errors.get(message.seq());
      if (error == null) {
        sent.add(message);
        continue;
      }
      failures.add(new Failure(message, error, message.attempt() >= maxAttempts));
      Duration delay = Backoff.jittered(firstBackoff, maxBackoff, message.attempt() - 1);
      failedSeqs.add(message.seq());
      failedErrors.add(Objects.requireNonNull(LogText.cut(describe(error))).replace('\0', ' '));
      delays.add(delay.toMillis() / 1000.0);
      Instant due = Instant.now().plus(delay);
      if (message.attempt() < maxAttempts && (nextDue == null || due.isBefore(nextDue))) {
        nextDue = due;
      }
    }
    Mono<Void> markSent = sent.isEmpty()
        ? Mono.empty()
        : execute(connection.createStatement(markSentSql).bind(0, sent.stream().map(OutboxMessage::seq).toArray(Long[]::new)));
    Mono<Void> markFailed = failedSeqs.isEmpty()
        ? Mono.empty()
        : execute(connection.createStatement(markFailedSql)
            .bind(0, failedSeqs.toArray(Long[]::new))
            .bind(1, failedErrors.toArray(String[]::new))
            .bind(2, delays.toArray(Double[]::new))
            .bind(3, maxAttempts));
    Round round = new Round(List.copyOf(sent), batch.size(), nextDue, batch.size() >= batchSize);
    return markSent.then(markFailed).onErrorMap(MarkFailed::new).thenReturn(round);
  }

  void afterCommit(Round round, List<Failure> failures) {
    Instant now = Instant.now();
    for (OutboxMessage message : round.sent()) {
      metrics.published(message, Duration.between(message.createdAt(), now));
    }
    if (failures.isEmpty()) {
      return;
    }
    Failure first = failures.get(0);
    log.warn("Outbox relay '{}': {} of {} publishes failed and will be retried with backoff (parked at {} attempts); first: "
        + "message '{}' (row {}, attempt {}): {}", name, failures.size(), round.claimed(), maxAttempts,
        LogText.cutId(first.message().id()), first.message().seq(), first.message().attempt(),
        LogText.cut(describe(first.error())));
    for (Failure failure : failures) {
      metrics.failed(failure.message(), failure.error());
      if (failure.parked()) {
        OutboxMessage message = failure.message();
        log.warn(
            "Outbox relay '{}' parked message '{}' (row {}, destination '{}') after {} attempts: {}. It stays in {} with status "
                + "PARKED; fix the cause, then PostgresOutbox.resend(\"{}\") or resendParked() sends it again with the same id",
            name, LogText.cutId(message.id()), message.seq(), LogText.cut(message.destination()), message.attempt(),
            LogText.cut(describe(failure.error())), table, LogText.cutId(message.id()));
        metrics.parked(message);
      }
    }
  }

  static String describe(Throwable error) {
    return error == null ? "unknown error" : error.toString();
  }

  private static Mono<Void> execute(Statement statement) {
    return Flux.from(statement.execute()).concatMap(result -> result.getRowsUpdated()).then();
  }

  /** Marking a published batch failed: the batch will be published again. */
  static final class MarkFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MarkFailed(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }
}
