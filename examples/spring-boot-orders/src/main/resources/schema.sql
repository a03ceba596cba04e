CREATE TABLE IF NOT EXISTS customers (id bigint PRIMARY KEY, orders bigint NOT NULL DEFAULT 0, total_cents bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS shop_orders (id bigserial PRIMARY KEY, order_id text NOT NULL, customer_id bigint NOT NULL, amount_cents bigint NOT NULL);
INSERT INTO customers (id) SELECT g FROM generate_series(1, 50) g ON CONFLICT DO NOTHING;
