-- 0001_init.sql — the data model of docs/internals.md ("Data model"), portable across SQLite and
-- PostgreSQL. Every table carries tenant_id and every primary key and unique
-- constraint starts with it, so all work for one callback is single-tenant
-- and the schema can be distributed by tenant. Money is BIGINT minor units
-- plus an ISO 4217 code. Times are RFC 3339 UTC text written by payonce.
-- Statements end with ";" at the end of a line (the runner splits there).

CREATE TABLE IF NOT EXISTS tenant (
    tenant_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id)
);

CREATE TABLE IF NOT EXISTS merchant (
    tenant_id   TEXT NOT NULL REFERENCES tenant (tenant_id),
    merchant_id TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, merchant_id)
);

-- Per tenant and channel: ids and keys. Secret fields inside config are
-- sealed with the master key before they are written here.
CREATE TABLE IF NOT EXISTS channel_account (
    tenant_id   TEXT NOT NULL REFERENCES tenant (tenant_id),
    channel     TEXT NOT NULL CHECK (channel IN ('wechatpay', 'alipay', 'stripe')),
    config      TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, channel)
);

-- PAYING -> PAID | CLOSED. refund_reserved is the sum of refunds requested
-- and not closed; refunded_amount the sum that succeeded.
-- 0 <= refunded_amount <= refund_reserved <= amount.
CREATE TABLE IF NOT EXISTS pay_order (
    tenant_id       TEXT NOT NULL,
    out_trade_no    TEXT NOT NULL,
    merchant_id     TEXT NOT NULL,
    channel         TEXT,
    amount          BIGINT NOT NULL CHECK (amount > 0),
    currency        TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('PAYING', 'PAID', 'CLOSED')),
    channel_txn_id  TEXT,
    paid_at         TEXT,
    refund_reserved BIGINT NOT NULL DEFAULT 0,
    refunded_amount BIGINT NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (tenant_id, out_trade_no),
    UNIQUE (tenant_id, channel, channel_txn_id),
    FOREIGN KEY (tenant_id, merchant_id) REFERENCES merchant (tenant_id, merchant_id),
    CHECK (refunded_amount >= 0 AND refunded_amount <= refund_reserved AND refund_reserved <= amount)
);

-- The processed-record table (layer 1 reads it, layer 3 is its key).
-- outcome: applied | suspense. Rejected events never occupy a key.
CREATE TABLE IF NOT EXISTS notify_log (
    tenant_id     TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    channel       TEXT NOT NULL,
    event_type    TEXT NOT NULL,
    source        TEXT NOT NULL CHECK (source IN ('callback', 'reconciliation', 'query')),
    outcome       TEXT NOT NULL CHECK (outcome IN ('applied', 'suspense')),
    reason        TEXT,
    out_trade_no  TEXT,
    amount        BIGINT NOT NULL,
    currency      TEXT NOT NULL,
    first_seen_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, idem_key)
);

-- PROCESSING -> SUCCESS | CLOSED | ABNORMAL; ABNORMAL -> SUCCESS | CLOSED.
CREATE TABLE IF NOT EXISTS refund (
    tenant_id         TEXT NOT NULL,
    out_refund_no     TEXT NOT NULL,
    out_trade_no      TEXT NOT NULL,
    channel           TEXT,
    amount            BIGINT NOT NULL CHECK (amount > 0),
    currency          TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('PROCESSING', 'SUCCESS', 'CLOSED', 'ABNORMAL')),
    channel_refund_id TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, out_refund_no),
    UNIQUE (tenant_id, channel, channel_refund_id),
    FOREIGN KEY (tenant_id, out_trade_no) REFERENCES pay_order (tenant_id, out_trade_no)
);

-- One journal per business event, keyed by the event's idempotency key.
-- kind: PAY | REFUND | PROFIT_SHARE | SUSPENSE.
CREATE TABLE IF NOT EXISTS journal (
    tenant_id    TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('PAY', 'REFUND', 'PROFIT_SHARE', 'SUSPENSE')),
    out_trade_no TEXT,
    out_refund_no TEXT,
    currency     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, idem_key)
);

-- Journal lines: signed minor units, debit positive, credit negative;
-- the lines of one journal sum to zero.
CREATE TABLE IF NOT EXISTS posting (
    tenant_id TEXT NOT NULL,
    idem_key  TEXT NOT NULL,
    line_no   INTEGER NOT NULL,
    account   TEXT NOT NULL,
    currency  TEXT NOT NULL,
    amount    BIGINT NOT NULL CHECK (amount <> 0),
    PRIMARY KEY (tenant_id, idem_key, line_no),
    FOREIGN KEY (tenant_id, idem_key) REFERENCES journal (tenant_id, idem_key)
);

-- Cached sum of postings per account and currency, updated in the same
-- transaction as the postings.
CREATE TABLE IF NOT EXISTS account_balance (
    tenant_id  TEXT NOT NULL,
    account    TEXT NOT NULL,
    currency   TEXT NOT NULL,
    balance    BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, account, currency)
);

-- Durable business-check failures and illegal transitions, for operators.
-- alert_key = idem_key + "|" + reason, so a retried bad event alerts once.
CREATE TABLE IF NOT EXISTS alert (
    tenant_id    TEXT NOT NULL,
    alert_key    TEXT NOT NULL,
    reason       TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    event_type   TEXT NOT NULL,
    source       TEXT NOT NULL,
    out_trade_no TEXT,
    amount       BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    detail       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, alert_key)
);

-- Stored responses for Idempotency-Key requests, scoped to tenant + route.
CREATE TABLE IF NOT EXISTS api_idempotency (
    tenant_id     TEXT NOT NULL,
    route         TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('running', 'done')),
    status_code   INTEGER,
    response_body TEXT,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, route, idem_key)
);

CREATE INDEX IF NOT EXISTS pay_order_status ON pay_order (tenant_id, status, created_at);
CREATE INDEX IF NOT EXISTS alert_created ON alert (tenant_id, created_at);
CREATE INDEX IF NOT EXISTS journal_order ON journal (tenant_id, out_trade_no);
