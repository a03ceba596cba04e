package dev.idem.internal;

import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxOperator;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoOperator;
import reactor.util.context.Context;

/**
 * Keeps a handler's JVM errors away from the database driver's thread.
 *
 * <p>The handler's operators run on the driver's thread when they follow a statement. Reactor
 * does not signal a JVM error ({@link VirtualMachineError}, {@link LinkageError}) that such an
 * operator raises: it rethrows it up the calling stack, into the driver, which closes the
 * connection, while the pipeline sees nothing until its transaction timeout and would retry the
 * message as an infrastructure failure. A publisher {@linkplain #guard(Flux) guarded} here sits
 * between the driver and the handler's operators: it catches such an error on its way up,
 * cancels the statement and hands the error to the reporter that the pipeline put in the
 * subscriber's context, which fails the message's attempt with it. Without a reporter (outside
 * the pipeline) the error is rethrown as before.
 *
 * <p>A mapping function {@linkplain #mapper(Function) wrapped} here, which the driver calls on its
 * own thread for each row, turns the JVM error it throws into a {@link JvmErrors.Signalled}, a
 * {@code RuntimeException} that Reactor signals like any other error.
 *
 * <p>Cost: one more operator per statement, and a {@code try} around each signal.
 */
public final class DriverBoundary {

  /** The context key of the {@code Consumer<Throwable>} that ends the current attempt with a JVM error. */
  public static final String REPORTER = DriverBoundary.class.getName() + ".reporter";

  private DriverBoundary() {}

  /**
   * A context with the reporter that ends the current attempt with a JVM error.
   *
   * @param context the context to extend
   * @param reporter ends the attempt with the error it is given
   * @return the extended context
   */
  public static Context withReporter(Context context, Consumer<Throwable> reporter) {
    return context.put(REPORTER, reporter);
  }

  /**
   * The driver's publisher, guarded.
   *
   * @param driver what the driver returned
   * @param <T> the element type
   * @return the same signals; a JVM error raised downstream is reported instead of rethrown
   */
  public static <T> Flux<T> guard(Flux<T> driver) {
    return new FluxOperator<T, T>(driver) {
      @Override
      public void subscribe(CoreSubscriber<? super T> actual) {
        source.subscribe(new Guard<>(actual));
      }
    };
  }

  /**
   * The driver's publisher, guarded.
   *
   * @param driver what the driver returned
   * @param <T> the element type
   * @return the same signals; a JVM error raised downstream is reported instead of rethrown
   */
  public static <T> Mono<T> guard(Mono<T> driver) {
    return new MonoOperator<T, T>(driver) {
      @Override
      public void subscribe(CoreSubscriber<? super T> actual) {
        source.subscribe(new Guard<>(actual));
      }
    };
  }

  /**
   * A row mapper whose JVM errors travel as {@link JvmErrors.Signalled} errors.
   *
   * @param mapper the user's mapper
   * @param <A> the row type
   * @param <R> the result type
   * @return the wrapped mapper
   */
  public static <A, R> Function<A, R> mapper(Function<A, R> mapper) {
    return row -> {
      try {
        return mapper.apply(row);
      } catch (VirtualMachineError | LinkageError e) {
        throw new JvmErrors.Signalled(e);
      }
    };
  }

  private static final class Guard<T> implements CoreSubscriber<T>, Subscription {
    private final CoreSubscriber<? super T> actual;
    private @Nullable Subscription upstream;
    private volatile boolean escalated;

    Guard(CoreSubscriber<? super T> actual) {
      this.actual = actual;
    }

    @Override
    public Context currentContext() {
      return actual.currentContext();
    }

    @Override
    public void onSubscribe(Subscription s) {
      upstream = s;
      try {
        actual.onSubscribe(this);
      } catch (VirtualMachineError | LinkageError e) {
        escalate(e);
      }
    }

    @Override
    public void onNext(T value) {
      if (escalated) {
        return;
      }
      try {
        actual.onNext(value);
      } catch (VirtualMachineError | LinkageError e) {
        escalate(e);
      }
    }

    @Override
    public void onError(Throwable error) {
      if (escalated) {
        return;
      }
      try {
        actual.onError(error);
      } catch (VirtualMachineError | LinkageError e) {
        escalate(e);
      }
    }

    @Override
    public void onComplete() {
      if (escalated) {
        return;
      }
      try {
        actual.onComplete();
      } catch (VirtualMachineError | LinkageError e) {
        escalate(e);
      }
    }

    @Override
    public void request(long n) {
      Objects.requireNonNull(upstream).request(n);
    }

    @Override
    public void cancel() {
      Objects.requireNonNull(upstream).cancel();
    }

    private void escalate(Error error) {
      Consumer<Throwable> reporter = actual.currentContext().getOrDefault(REPORTER, null);
      if (reporter == null) {
        throw error;
      }
      escalated = true;
      Objects.requireNonNull(upstream).cancel();
      reporter.accept(error);
    }
  }
}
