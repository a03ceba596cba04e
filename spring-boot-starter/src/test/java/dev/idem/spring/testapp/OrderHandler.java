package dev.idem.spring.testapp;

import dev.idem.Handler;
import dev.idem.Tx;
import org.reactivestreams.Publisher;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.stereotype.Component;

/** The configured RabbitMQ consumer's handler: one row per order, written through {@link DatabaseClient}. */
@Component("orderHandler")
public class OrderHandler implements Handler<String> {
  /** The table. */
  public static final String TABLE = "idem_spring_orders";

  private final DatabaseClient db;

  /**
   * Creates the handler.
   *
   * @param db the application's client
   */
  public OrderHandler(DatabaseClient db) {
    this.db = db;
  }

  @Override
  public Publisher<?> handle(String body, Tx tx) {
    return db.sql("INSERT INTO " + TABLE + " (message_id, body) VALUES (:id, :body)")
        .bind("id", tx.messageId()).bind("body", body)
        .fetch().rowsUpdated();
  }
}
