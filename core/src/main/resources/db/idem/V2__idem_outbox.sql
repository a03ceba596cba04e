-- Idem outbox: messages a handler writes in its transaction (with the dedup row and the
-- business change) for OutboxRelay to send after commit. Usable as a Flyway or Liquibase
-- migration as it is; PostgresOutbox.createSchemaIfAbsent() runs the same statements with the
-- configured table name (every word starting with idem_outbox is renamed after it).
CREATE TABLE IF NOT EXISTS idem_outbox (
  seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- relay order
  message_id      text        NOT NULL,                    -- stable id sent with the message
  destination     text        NOT NULL,                    -- topic, routing key, URL, ...
  message_key     text,                                    -- ordering and partitioning key
  payload         bytea       NOT NULL,
  headers         jsonb       NOT NULL DEFAULT '{}',       -- text values
  created_at      timestamptz NOT NULL DEFAULT now(),
  status          text        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SENT', 'PARKED')),
  attempts        integer     NOT NULL DEFAULT 0,          -- publish attempts so far
  next_attempt_at timestamptz NOT NULL DEFAULT now(),      -- backoff after a failed attempt
  last_error      text,
  sent_at         timestamptz,
  parked_at       timestamptz
);

-- The relay claims pending rows in seq order.
CREATE INDEX IF NOT EXISTS idem_outbox_pending_idx ON idem_outbox (seq) WHERE status = 'PENDING';
-- Per-key order: a row waits while an earlier unsent (pending or parked) row of its key exists.
CREATE INDEX IF NOT EXISTS idem_outbox_key_idx ON idem_outbox (message_key, seq) WHERE status <> 'SENT';
-- Parked rows, for operators and the parked gauge.
CREATE INDEX IF NOT EXISTS idem_outbox_parked_idx ON idem_outbox (seq) WHERE status = 'PARKED';
-- Retention removes sent rows by age.
CREATE INDEX IF NOT EXISTS idem_outbox_sent_at_idx ON idem_outbox (sent_at) WHERE status = 'SENT';
