-- 0016_callback_delivery.sql — every verified callback as payonce answered
-- it, for the console's order trail (issue 26 item 1: "its deliveries,
-- their outcomes and layers"): when, which node's request, the order, the
-- outcome and the layer that caught a duplicate, the reason of a refusal,
-- the HTTP status of the ack and how long it took. Written in bulk every
-- two seconds by each node from a bounded buffer (traffic.c), never inside
-- the callback's transaction: a view of what was answered, not the ledger
-- (the processed records are). Forged callbacks (refused before
-- verification) are counted in traffic only. Pruned with the history
-- (console-history-days).
CREATE TABLE IF NOT EXISTS callback_delivery (
    tenant_id    TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    at           TEXT NOT NULL,
    node         TEXT NOT NULL,
    channel      TEXT NOT NULL,
    out_trade_no TEXT,
    outcome      TEXT NOT NULL,
    layer        INTEGER NOT NULL,
    reason       TEXT,
    status       INTEGER NOT NULL,
    micros       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, request_id)
);
CREATE INDEX IF NOT EXISTS callback_delivery_order ON callback_delivery (tenant_id, out_trade_no, at);
CREATE INDEX IF NOT EXISTS callback_delivery_at ON callback_delivery (at);
