CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, event_id text NOT NULL, account_id bigint NOT NULL, amount_cents bigint NOT NULL);
INSERT INTO accounts (id) SELECT g FROM generate_series(1, 20) g ON CONFLICT DO NOTHING;
