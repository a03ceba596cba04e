package dev.idem.test.internal;

import dev.idem.MessageMetadata;
import dev.idem.Tx;
import io.r2dbc.spi.Batch;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionMetadata;
import io.r2dbc.spi.IsolationLevel;
import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import io.r2dbc.spi.TransactionDefinition;
import io.r2dbc.spi.ValidationDepth;
import java.time.Duration;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;

/**
 * The pipeline's {@code Tx} as the handler under test sees it: every statement created on its
 * connection (by {@code tx.sql}, {@code tx.outbox} or the raw connection) is counted by the
 * {@link Attempt}, which may fail it.
 */
final class InstrumentedTx implements Tx {

  private final Tx delegate;
  private final Connection connection;

  InstrumentedTx(Tx delegate, Attempt attempt) {
    this.delegate = delegate;
    this.connection = new CountingConnection(delegate.connection(), attempt);
  }

  @Override
  public Connection connection() {
    return connection;
  }

  @Override
  public String messageId() {
    return delegate.messageId();
  }

  @Override
  public MessageMetadata metadata() {
    return delegate.metadata();
  }

  @Override
  public String consumer() {
    return delegate.consumer();
  }

  private record CountingConnection(Connection delegate, Attempt attempt) implements Connection {

    @Override
    public Statement createStatement(String sql) {
      return new CountingStatement(delegate.createStatement(sql), attempt);
    }

    @Override
    public Publisher<Void> beginTransaction() {
      return delegate.beginTransaction();
    }

    @Override
    public Publisher<Void> beginTransaction(TransactionDefinition definition) {
      return delegate.beginTransaction(definition);
    }

    @Override
    public Publisher<Void> close() {
      return delegate.close();
    }

    @Override
    public Publisher<Void> commitTransaction() {
      return delegate.commitTransaction();
    }

    @Override
    public Batch createBatch() {
      return delegate.createBatch();
    }

    @Override
    public Publisher<Void> createSavepoint(String name) {
      return delegate.createSavepoint(name);
    }

    @Override
    public boolean isAutoCommit() {
      return delegate.isAutoCommit();
    }

    @Override
    public ConnectionMetadata getMetadata() {
      return delegate.getMetadata();
    }

    @Override
    public IsolationLevel getTransactionIsolationLevel() {
      return delegate.getTransactionIsolationLevel();
    }

    @Override
    public Publisher<Void> releaseSavepoint(String name) {
      return delegate.releaseSavepoint(name);
    }

    @Override
    public Publisher<Void> rollbackTransaction() {
      return delegate.rollbackTransaction();
    }

    @Override
    public Publisher<Void> rollbackTransactionToSavepoint(String name) {
      return delegate.rollbackTransactionToSavepoint(name);
    }

    @Override
    public Publisher<Void> setAutoCommit(boolean autoCommit) {
      return delegate.setAutoCommit(autoCommit);
    }

    @Override
    public Publisher<Void> setLockWaitTimeout(Duration timeout) {
      return delegate.setLockWaitTimeout(timeout);
    }

    @Override
    public Publisher<Void> setStatementTimeout(Duration timeout) {
      return delegate.setStatementTimeout(timeout);
    }

    @Override
    public Publisher<Void> setTransactionIsolationLevel(IsolationLevel level) {
      return delegate.setTransactionIsolationLevel(level);
    }

    @Override
    public Publisher<Boolean> validate(ValidationDepth depth) {
      return delegate.validate(depth);
    }
  }

  private static final class CountingStatement implements Statement {

    private final Statement delegate;
    private final Attempt attempt;

    CountingStatement(Statement delegate, Attempt attempt) {
      this.delegate = delegate;
      this.attempt = attempt;
    }

    @Override
    public Publisher<? extends Result> execute() {
      return Flux.defer(() -> attempt.beforeStatement() ? Flux.error(attempt.failure()) : delegate.execute());
    }

    @Override
    public Statement add() {
      delegate.add();
      return this;
    }

    @Override
    public Statement bind(int index, Object value) {
      delegate.bind(index, value);
      return this;
    }

    @Override
    public Statement bind(String name, Object value) {
      delegate.bind(name, value);
      return this;
    }

    @Override
    public Statement bindNull(int index, Class<?> type) {
      delegate.bindNull(index, type);
      return this;
    }

    @Override
    public Statement bindNull(String name, Class<?> type) {
      delegate.bindNull(name, type);
      return this;
    }

    @Override
    public Statement returnGeneratedValues(String... columns) {
      delegate.returnGeneratedValues(columns);
      return this;
    }

    @Override
    public Statement fetchSize(int rows) {
      delegate.fetchSize(rows);
      return this;
    }
  }
}
