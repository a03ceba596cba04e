package dev.idem.examples;

import dev.idem.outbox.OutboxMessage;
import dev.idem.outbox.OutboxPublisher;
import dev.idem.outbox.OutboxRelay;
import dev.idem.outbox.PostgresOutbox;
import dev.idem.outbox.RelayOrdering;
import dev.idem.postgres.PostgresConnections;
import dev.idem.rabbit.RabbitOutboxPublisher;
import java.util.List;
import java.util.stream.Collectors;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * An outbox relay in its own JVM, for the crash test. With {@code stall-after-publish} its
 * publisher, once the broker confirmed a batch, prints {@code PUBLISHED <n> <ids>} and never
 * returns, so the relay's round stands between the publish and the mark until the test kills the
 * process with SIGKILL.
 */
public final class RelayProcess {

  private RelayProcess() {}

  /**
   * Runs the relay until killed.
   *
   * @param args R2DBC URL, outbox table, AMQP URI, batch size, mode ({@code stall-after-publish} or {@code normal})
   * @throws InterruptedException never in practice
   */
  public static void main(String[] args) throws InterruptedException {
    PostgresOutbox outbox = PostgresOutbox.create(PostgresConnections.pool(args[0], 2), args[1]);
    OutboxPublisher rabbit = RabbitOutboxPublisher.create(args[2]);
    int batchSize = Integer.parseInt(args[3]);
    OutboxPublisher publisher = "stall-after-publish".equals(args[4]) ? new OutboxPublisher() {
      @Override
      public Mono<Void> publish(OutboxMessage message) {
        return rabbit.publish(message);
      }

      @Override
      public Flux<Result> publishAll(List<OutboxMessage> messages) {
        return rabbit.publishAll(messages).collectList()
            .doOnNext(results -> {
              System.out.println("PUBLISHED " + results.stream().filter(Result::isSent).count() + " "
                  + results.stream().map(r -> r.message().id()).collect(Collectors.joining(",")));
              System.out.flush();
            })
            .thenMany(Flux.never());
      }
    } : rabbit;
    OutboxRelay.builder(outbox, publisher).ordering(RelayOrdering.UNORDERED).batchSize(batchSize).build().run().subscribe();
    System.out.println("relay process started");
    Thread.currentThread().join();
  }
}
