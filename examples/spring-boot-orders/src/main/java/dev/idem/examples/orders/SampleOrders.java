package dev.idem.examples.orders;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.stereotype.Component;

/**
 * Sends sample orders once the application has started, for trying it by hand:
 * {@code --orders.samples=20} sends 20 orders on each broker, each of them twice (the repeat is a
 * duplicate), and one order per broker for the unknown customer 999 (a dead letter). Off unless
 * {@code orders.samples} is set; the tests do not set it.
 */
@Component
@ConditionalOnProperty("orders.samples")
public class SampleOrders implements CommandLineRunner {

  private final OrderPublisher publisher;
  private final int count;

  /**
   * Creates the sender.
   *
   * @param publisher the application's publisher
   * @param count {@code orders.samples}: orders per broker
   */
  public SampleOrders(OrderPublisher publisher, @Value("${orders.samples}") int count) {
    this.publisher = publisher;
    this.count = count;
  }

  @Override
  public void run(String... args) {
    long run = System.currentTimeMillis();
    List<CompletableFuture<Void>> sent = new ArrayList<>();
    for (int i = 1; i <= count; i++) {
      Order web = new Order("web-" + run + "-" + i, 1 + i % 50, 1_000);
      Order store = new Order("store-" + run + "-" + i, 1 + i % 50, 100);
      sent.add(publisher.toKafka(web));
      sent.add(publisher.toKafka(web));
      sent.add(publisher.toRabbit(store));
      sent.add(publisher.toRabbit(store));
    }
    sent.add(publisher.toKafka(new Order("web-" + run + "-unknown", 999, 1)));
    sent.add(publisher.toRabbit(new Order("store-" + run + "-unknown", 999, 1)));
    CompletableFuture.allOf(sent.toArray(CompletableFuture[]::new)).join();
    System.out.println("Sent " + count + " orders on each broker, each twice, and one for unknown customer 999 on each");
  }
}
