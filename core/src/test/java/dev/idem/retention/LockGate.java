package dev.idem.retention;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import io.r2dbc.spi.Statement;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Connections from a pool whose first {@code LOCK TABLE} after {@link #arm} is held back until
 * {@link #release}, as a cleanup starved of CPU (or slow to get its round trips through) would
 * send it late.
 */
final class LockGate implements ConnectionFactory {
  private final ConnectionFactory pool;
  private final AtomicReference<String> held = new AtomicReference<>();
  private volatile boolean armed;
  private volatile CompletableFuture<Void> released = CompletableFuture.completedFuture(null);

  LockGate(ConnectionFactory pool) {
    this.pool = pool;
  }

  void arm() {
    held.set(null);
    released = new CompletableFuture<>();
    armed = true;
  }

  /** The partition whose LOCK TABLE is held back, or null. */
  String held() {
    return held.get();
  }

  void release() {
    armed = false;
    released.complete(null);
  }

  @Override
  public Publisher<? extends Connection> create() {
    return Mono.from(pool.create()).map(this::gated);
  }

  @Override
  public ConnectionFactoryMetadata getMetadata() {
    return pool.getMetadata();
  }

  private Connection gated(Connection connection) {
    return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[]{Connection.class},
        (proxy, method, args) -> {
          Object result = invoke(connection, method, args);
          if (method.getName().equals("createStatement") && ((String) args[0]).startsWith("LOCK TABLE ")) {
            return gatedStatement((Statement) result, ((String) args[0]).split(" ")[2]);
          }
          return result;
        });
  }

  private Statement gatedStatement(Statement statement, String partition) {
    return (Statement) Proxy.newProxyInstance(Statement.class.getClassLoader(), new Class<?>[]{Statement.class},
        (proxy, method, args) -> {
          if (method.getName().equals("execute") && armed && held.compareAndSet(null, partition)) {
            CompletableFuture<Void> gateOpen = released;
            return Mono.fromFuture(gateOpen).thenMany(Flux.defer(statement::execute));
          }
          return invoke(statement, method, args);
        });
  }

  private static Object invoke(Object target, Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
