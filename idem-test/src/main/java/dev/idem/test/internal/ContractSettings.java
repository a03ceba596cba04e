package dev.idem.test.internal;

import dev.idem.Delivery;
import dev.idem.test.EffectProbe;
import dev.idem.test.InMemoryDelivery;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;

/**
 * What a {@code HandlerContract.Builder} collected, checked; immutable.
 *
 * @param name the contract's name, for reports
 * @param handler the handler under test
 * @param connectionFactory the user's factory, or {@code null} when {@code url} is set
 * @param url the user's R2DBC URL, or {@code null}
 * @param messages the message templates, in clean-run order
 * @param messageId the id rule
 * @param reset restores the business state
 * @param probe reads the business state
 * @param sideEffects counts calls to the user's fakes, or {@code null}
 * @param inboxTable the runner's inbox table
 * @param stepTimeout the longest wait for one step
 * @param <T> the payload type
 */
public record ContractSettings<T>(String name, HandlerUnderTest<T> handler, @Nullable ConnectionFactory connectionFactory,
    @Nullable String url, List<InMemoryDelivery<T>> messages, Function<? super Delivery<T>, @Nullable String> messageId,
    Function<Connection, Publisher<?>> reset, EffectProbe probe, @Nullable LongSupplier sideEffects, String inboxTable,
    Duration stepTimeout) {}
