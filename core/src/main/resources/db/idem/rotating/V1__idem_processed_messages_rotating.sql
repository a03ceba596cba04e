-- Idem inbox, rotating layout: instead of V1__idem_processed_messages.sql, for high volumes.
-- Ids live in slot partitions that take turns by time period; retention empties a whole slot
-- with TRUNCATE (O(1), no dead rows) once its newest possible id is older than the window,
-- while a per-id advisory lock and a look into every slot keep each id unique inside the window.
-- PostgresInbox.rotating(...).createSchemaIfAbsent() runs these statements with the configured
-- table name and fills the layout row. With Flyway or Liquibase: run this file, then
--   INSERT INTO processed_messages_rotating_layout (period_ms, slots) VALUES (<period in ms>, <periods + 2>);
-- before the DO block at the end (or run the block again after the insert).
CREATE TABLE IF NOT EXISTS processed_messages_rotating_layout (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  period_ms bigint  NOT NULL CHECK (period_ms >= 1000),
  slots     integer NOT NULL CHECK (slots >= 3)
);

CREATE TABLE IF NOT EXISTS processed_messages_rotating (
  consumer     text        NOT NULL,
  message_id   text        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  slot         integer     NOT NULL,
  PRIMARY KEY (consumer, message_id, slot)
) PARTITION BY LIST (slot);

-- Records the ids that are new for the consumer and returns them. Needs READ COMMITTED: each
-- statement of this VOLATILE function takes a fresh snapshot, so after the lock is granted the
-- look into the slots sees whatever a concurrent transaction with the same id committed.
CREATE OR REPLACE FUNCTION processed_messages_rotating_record(p_consumer text, p_ids text[])
RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_period bigint;
  v_slots integer;
  v_slot integer;
  v_id text;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'the rotating inbox processed_messages_rotating needs READ COMMITTED transactions, not %',
      current_setting('transaction_isolation');
  END IF;
  SELECT period_ms, slots INTO STRICT v_period, v_slots FROM processed_messages_rotating_layout;
  v_slot := (floor(extract(epoch FROM now()) * 1000 / v_period)::bigint % v_slots)::integer;
  FOR v_id IN SELECT DISTINCT u FROM unnest(p_ids) AS u ORDER BY u LOOP
    PERFORM pg_advisory_xact_lock(hashtext('processed_messages_rotating'), hashtext(p_consumer || chr(31) || v_id));
  END LOOP;
  RETURN QUERY
    WITH added AS (
      INSERT INTO processed_messages_rotating (consumer, message_id, processed_at, slot)
      SELECT p_consumer, ids.u, now(), v_slot
      FROM (SELECT DISTINCT u FROM unnest(p_ids) AS u) AS ids
      WHERE NOT EXISTS (SELECT 1 FROM processed_messages_rotating p WHERE p.consumer = p_consumer AND p.message_id = ids.u)
      ORDER BY ids.u
      ON CONFLICT DO NOTHING
      RETURNING message_id)
    SELECT message_id FROM added;
END
$$;

-- One partition per slot, named processed_messages_rotating_p<slot>.
DO $$
DECLARE
  v_slots integer;
BEGIN
  SELECT slots INTO v_slots FROM processed_messages_rotating_layout;
  IF v_slots IS NULL THEN
    RAISE EXCEPTION 'insert the layout row into processed_messages_rotating_layout first';
  END IF;
  FOR s IN 0 .. v_slots - 1 LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %s PARTITION OF processed_messages_rotating FOR VALUES IN (%s)',
      'processed_messages_rotating_p' || s, s);
  END LOOP;
END
$$;
