-- Idem inbox: one row per (consumer, message id) that committed its effect.
-- Usable as a Flyway or Liquibase migration as it is; PostgresInbox.createSchemaIfAbsent()
-- runs the same statements with the configured table name.
CREATE TABLE IF NOT EXISTS processed_messages (
  consumer     text        NOT NULL,
  message_id   text        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id)
);

-- Retention deletes by age; this index keeps those deletes off the live workload's way.
CREATE INDEX IF NOT EXISTS processed_messages_processed_at_idx ON processed_messages (processed_at);
