-- 0017_callback_record.sql — the tamper-evident record of every verified
-- callback (issue 28 item 3; docs/reliability.md, "The callback record").
--
-- callback_record: the request as received (its headers and body, each
-- base64 so that any byte survives both stores, in callback_body), written in the same
-- transaction as what the callback did — a credit and its evidence commit
-- together or not at all. digest is SHA-256 over the record's fields
-- (tenant, request, time, channel, path, order, headers, body). seq,
-- prev_hash and hash are NULL until the record is sealed into its tenant's
-- chain (every node seals every two seconds, each tenant's chain under its
-- callback_chain row): hash = SHA-256(prev_hash "\n" seq "\n" digest), so a
-- record changed, removed or moved breaks the chain at that place and
-- `payonce audit verify` names it.
--
-- callback_chain: each tenant's chain head (seq, hash: the newest sealed
-- record) and base (base_seq, base_hash: the last record pruned away by
-- retention; 0 and 64 zeros before any pruning), so the oldest record kept
-- is linked to something and a removed newest record is seen.
CREATE TABLE IF NOT EXISTS callback_record (
    tenant_id    TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    received_at  TEXT NOT NULL,
    channel      TEXT NOT NULL,
    path         TEXT NOT NULL,
    out_trade_no TEXT NOT NULL,
    digest       TEXT NOT NULL,
    seq          BIGINT,
    prev_hash    TEXT,
    hash         TEXT,
    PRIMARY KEY (tenant_id, request_id)
);
-- Two partial indexes, so that a query for the unsealed can only use the
-- one that gives them in order (no sort of every unsealed record for each
-- 200 sealed) and an insert touches only that one.
CREATE UNIQUE INDEX IF NOT EXISTS callback_record_chain ON callback_record (tenant_id, seq)
    WHERE seq IS NOT NULL;
CREATE INDEX IF NOT EXISTS callback_record_unsealed
    ON callback_record (tenant_id, received_at, request_id) WHERE seq IS NULL;
CREATE INDEX IF NOT EXISTS callback_record_order ON callback_record (tenant_id, out_trade_no);
-- The wide part, never updated: sealing rewrites the narrow row above
-- only (on SQLite, rewriting the ~2 KB rows with their bodies cost 15 % of
-- the callbacks' throughput).
CREATE TABLE IF NOT EXISTS callback_body (
    tenant_id  TEXT NOT NULL,
    request_id TEXT NOT NULL,
    headers    TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (tenant_id, request_id)
);
CREATE TABLE IF NOT EXISTS callback_chain (
    tenant_id TEXT PRIMARY KEY,
    seq       BIGINT NOT NULL,
    hash      TEXT NOT NULL,
    base_seq  BIGINT NOT NULL,
    base_hash TEXT NOT NULL
);
