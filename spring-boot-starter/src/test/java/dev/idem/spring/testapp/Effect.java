package dev.idem.spring.testapp;

import org.springframework.data.annotation.Id;
import org.springframework.data.relational.core.mapping.Table;

/**
 * A row a handler writes through a Spring Data repository.
 *
 * @param id generated
 * @param messageId the message that wrote it
 * @param note free text
 */
@Table(Effect.TABLE)
public record Effect(@Id Long id, String messageId, String note) {
  /** The table. */
  public static final String TABLE = "idem_spring_effects";
  /** Its schema. */
  public static final String DDL = "CREATE TABLE IF NOT EXISTS " + TABLE
      + " (id bigserial PRIMARY KEY, message_id text NOT NULL, note text NOT NULL)";
}
