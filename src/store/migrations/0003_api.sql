-- 0003_api.sql — the tenant API (/v1): API keys, stored responses for
-- Idempotency-Key requests, and refund submission to the channel.

-- Only the SHA-256 of a key is stored. key_id is the public part of the
-- key (po_<key_id>_<secret>), which finds the row; the tenant comes from it.
CREATE TABLE IF NOT EXISTS api_key (
    tenant_id   TEXT NOT NULL REFERENCES tenant (tenant_id),
    key_id      TEXT NOT NULL,
    key_hash    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT,
    PRIMARY KEY (tenant_id, key_id)
);
CREATE INDEX IF NOT EXISTS api_key_by_id ON api_key (key_id);

-- 0001's api_idempotency was never used; this is its working shape.
-- A row is 'running' from the moment a request claims the key (committed
-- before the work starts, so a concurrent retry sees it and gets 409) until
-- the transaction of the request's effect stores the final response and
-- sets 'done'. lock_token fences a takeover of a stale 'running' row.
DROP TABLE IF EXISTS api_idempotency;
CREATE TABLE api_idempotency (
    tenant_id     TEXT NOT NULL,
    route         TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('running', 'done')),
    lock_token    TEXT NOT NULL,
    locked_at     TEXT NOT NULL,
    status_code   INTEGER,
    response_body TEXT,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, route, idem_key)
);
CREATE INDEX IF NOT EXISTS api_idempotency_created ON api_idempotency (created_at);

-- Refunds requested through the API are submitted to the channel after the
-- request's transaction commits: pending -> submitted | rejected. 'none' is
-- a refund recorded without submission (CLI), 'manual' one whose channel
-- payonce cannot submit to (it waits for the channel's notification).
ALTER TABLE refund ADD COLUMN submit_state TEXT NOT NULL DEFAULT 'none'
    CHECK (submit_state IN ('none', 'manual', 'pending', 'submitted', 'rejected'));
ALTER TABLE refund ADD COLUMN submit_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refund ADD COLUMN submit_error TEXT;
CREATE INDEX IF NOT EXISTS refund_submit ON refund (submit_state, updated_at);
