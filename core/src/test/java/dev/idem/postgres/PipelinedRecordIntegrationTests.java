package dev.idem.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.idem.testing.PostgresService;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import reactor.core.Exceptions;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The dedup insert that the default transaction runner sends right behind BEGIN, before BEGIN's
 * answer: should BEGIN not start the transaction, the insert would run on its own and commit at
 * once, recording the id without its effect. The pipelined form refuses to run outside the
 * transaction of a pipelined BEGIN.
 */
class PipelinedRecordIntegrationTests {

  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private final PostgresService postgres = PostgresService.get();
  private ConnectionPool pool;
  private PostgresInbox inbox;

  private void createInbox(boolean rotating) {
    String table = PostgresService.uniqueName("inbox");
    inbox = rotating ? PostgresInbox.rotating(pool, table, Duration.ofHours(1), 4) : PostgresInbox.create(pool, table);
    inbox.createSchemaIfAbsent().block(TIMEOUT);
  }

  @BeforeEach
  void setUp() {
    pool = postgres.pool(2);
  }

  @AfterEach
  void tearDown() {
    if (inbox != null) {
      postgres.execute("DROP TABLE IF EXISTS " + inbox.table() + " CASCADE");
      if (inbox.rotatingLayout() != null) {
        postgres.execute("DROP TABLE IF EXISTS " + inbox.table() + "_layout",
            "DROP FUNCTION IF EXISTS " + inbox.table() + "_record(text, text[])");
      }
    }
    pool.dispose();
  }

  private static Mono<Void> execute(Connection connection, String sql) {
    return Flux.from(connection.createStatement(sql).execute()).concatMap(Result::getRowsUpdated).then();
  }

  private static java.util.List<String> sqlStates(Throwable error) {
    return Exceptions.unwrapMultiple(error).stream()
        .map(e -> e instanceof R2dbcException r2dbc ? r2dbc.getSqlState() : e.toString()).distinct().toList();
  }

  private long rows(String id) {
    return postgres.count("SELECT count(*) FROM " + inbox.table() + " WHERE message_id = $1", id);
  }

  @ParameterizedTest(name = "rotating layout: {0}")
  @ValueSource(booleans = {false, true})
  void aPipelinedRecordBehindABeginThatNeverRanWritesNothingWhereAPlainOneWouldCommitTheId(boolean rotating) {
    createInbox(rotating);
    Connection connection = Mono.from(pool.create()).block(TIMEOUT);
    try {
      // The query string does not parse, so none of it runs: not even BEGIN.
      String failingBegin = "BEGIN; SET LOCAL idem.in_transaction = 'on'; SELEC 1;";

      Throwable guarded = catchThrowable(() -> Mono.zipDelayError(execute(connection, failingBegin).thenReturn(true),
          inbox.recordPipelined(connection, "c", "guarded")).block(TIMEOUT));
      execute(connection, "ROLLBACK").block(TIMEOUT);
      assertThat(sqlStates(guarded)).as("BEGIN did not parse, the insert refused to run alone").contains("42601", "23502");
      assertThat(rows("guarded")).as("the pipelined form wrote nothing").isZero();

      // The hazard it guards against: the plain form behind the same BEGIN commits the id on its own.
      Throwable unguarded = catchThrowable(() -> Mono.zipDelayError(execute(connection, failingBegin).thenReturn(true),
          inbox.record(connection, "c", "unguarded")).block(TIMEOUT));
      assertThat(sqlStates(unguarded)).as("only BEGIN failed").containsOnly("42601");
      execute(connection, "ROLLBACK").block(TIMEOUT);
      assertThat(rows("unguarded")).isEqualTo(1);
    } finally {
      Mono.from(connection.close()).block(TIMEOUT);
    }
  }

  @ParameterizedTest(name = "rotating layout: {0}")
  @ValueSource(booleans = {false, true})
  void aPipelinedRecordInsideItsTransactionRecordsOnceAndTheSettingEndsWithTheTransaction(boolean rotating) {
    createInbox(rotating);
    Connection connection = Mono.from(pool.create()).block(TIMEOUT);
    try {
      String begin = "BEGIN; SET LOCAL idem.in_transaction = 'on';";

      Boolean first = Mono
          .zip(execute(connection, begin).thenReturn(true), inbox.recordPipelined(connection, "c", "m-1"), (b, r) -> r)
          .block(TIMEOUT);
      execute(connection, "COMMIT").block(TIMEOUT);
      Boolean again = Mono
          .zip(execute(connection, begin).thenReturn(true), inbox.recordPipelined(connection, "c", "m-1"), (b, r) -> r)
          .block(TIMEOUT);
      execute(connection, "COMMIT").block(TIMEOUT);

      assertThat(first).isTrue();
      assertThat(again).as("a duplicate").isFalse();
      assertThat(rows("m-1")).isEqualTo(1);
      Set<String> many = Mono.zip(execute(connection, begin).thenReturn(true),
          inbox.recordAllPipelined(connection, "c", List.of("m-1", "m-3", "m-4", "m-3")), (b, r) -> r).block(TIMEOUT);
      execute(connection, "COMMIT").block(TIMEOUT);
      assertThat(many).containsExactlyInAnyOrder("m-3", "m-4");
      assertThatThrownBy(() -> inbox.recordAllPipelined(connection, "c", List.of("m-5")).block(TIMEOUT))
          .isInstanceOf(R2dbcException.class);
      assertThat(rows("m-5")).isZero();
      // After COMMIT the setting is gone: on the same session, outside a transaction, the insert fails.
      assertThatThrownBy(() -> inbox.recordPipelined(connection, "c", "m-2").block(TIMEOUT)).isInstanceOf(R2dbcException.class);
      assertThat(rows("m-2")).isZero();
    } finally {
      Mono.from(connection.close()).block(TIMEOUT);
    }
  }
}
