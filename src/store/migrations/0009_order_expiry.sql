-- 0009_order_expiry.sql — an order's expiry (issue 23, item 2): when it
-- passes, `serve` closes the order at its channel and then here, as
-- POST /v1/orders/{no}/close does. expires_at is the order's time_expire in
-- the store's time format (UTC, compared as text), NULL for none; a
-- tenant's order_ttl_s gives the orders created without one theirs (NULL
-- or 0: none).
ALTER TABLE pay_order ADD COLUMN expires_at TEXT;
ALTER TABLE tenant ADD COLUMN order_ttl_s BIGINT;
CREATE INDEX IF NOT EXISTS pay_order_expiry ON pay_order (expires_at)
    WHERE status = 'PAYING' AND expires_at IS NOT NULL;
