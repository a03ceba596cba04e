package dev.idem;

import dev.idem.internal.DriverBoundary;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.Objects;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A statement on the message's transaction with fluent binding. Created by {@link Tx#sql}.
 * Not thread-safe; use one per statement.
 */
public final class Sql {

  private final Statement statement;

  Sql(Statement statement) {
    this.statement = Objects.requireNonNull(statement, "statement");
  }

  /**
   * Binds a non-null value to a zero-based placeholder index ({@code $1} is index 0).
   *
   * @param index the placeholder index
   * @param value the value, not {@code null} (use {@link #bindNull})
   * @return this statement
   */
  public Sql bind(int index, Object value) {
    statement.bind(index, Objects.requireNonNull(value, "value (use bindNull for nulls)"));
    return this;
  }

  /**
   * Binds SQL NULL of the given type.
   *
   * @param index the placeholder index
   * @param type the Java type of the column
   * @return this statement
   */
  public Sql bindNull(int index, Class<?> type) {
    statement.bindNull(index, type);
    return this;
  }

  /**
   * Runs the statement.
   *
   * @return the number of rows it affected
   */
  public Mono<Long> execute() {
    return DriverBoundary.guard(Flux.from(statement.execute())
        .concatMap(result -> Mono.from(result.getRowsUpdated()))
        .reduce(0L, Long::sum));
  }

  /**
   * Runs a query and maps each row.
   *
   * @param mapper turns a row into a value
   * @param <R> the value type
   * @return the mapped rows
   */
  public <R> Flux<R> map(Function<? super Readable, ? extends R> mapper) {
    Function<? super Readable, ? extends R> guarded = DriverBoundary.mapper(mapper);
    return DriverBoundary.guard(Flux.from(statement.execute()).concatMap(result -> result.map(guarded::apply)));
  }
}
