-- 0015_console.sql — the operator's console (issue 26 item 1).
--
-- operator and operator_session are reference tables (docs/scaling.md): the
-- console's people belong to the deployment, not to a tenant.
--
-- operator: people, not a shared token. Created by the CLI (payonce
-- operator add); the password is kept only as an scrypt hash in the
-- modular-crypt form $scrypt$ln=15,r=8,p=1$SALT$HASH. role: viewer (reads),
-- operator (also works alerts), admin (also sees the operators). Five
-- wrong passwords in a row lock the name for a minute (locked_until).
CREATE TABLE IF NOT EXISTS operator (
    name          TEXT NOT NULL PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    pw_hash       TEXT NOT NULL,
    failures      INTEGER NOT NULL DEFAULT 0,
    locked_until  TEXT,
    created_at    TEXT NOT NULL,
    last_login_at TEXT
);

-- A signed-in browser: the SHA-256 of its cookie's random token (the token
-- itself is never stored), the operator, the CSRF token every
-- state-changing request must echo, and when it ends. Sign-out, removing
-- the operator or a new password deletes the rows.
CREATE TABLE IF NOT EXISTS operator_session (
    token_hash  TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL REFERENCES operator (name) ON DELETE CASCADE,
    csrf        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS operator_session_name ON operator_session (name);

-- The console's history: what each serve node counted of the callbacks it
-- answered, added per five-minute bucket (bucket: 'YYYY-MM-DDTHH:MM', UTC),
-- tenant, channel and node, one row per kind: an outcome
-- ('applied', 'duplicate:1'..'duplicate:3', 'rejected', 'suspense',
-- 'retry', 'ignored', 'invalid'), an ack-latency bucket ('ack_le:1' ..
-- 'ack_le:5000' ms, 'ack_le:inf'), or the volume credited ('volume:CNY',
-- minor units of the payments applied). Written by every node every few
-- seconds from counters kept in memory (traffic.c), so it survives
-- restarts; pruned after console-history-days.
CREATE TABLE IF NOT EXISTS traffic (
    bucket     TEXT NOT NULL,
    tenant_id  TEXT NOT NULL,
    channel    TEXT NOT NULL,
    node       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    n          BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, bucket, channel, node, kind)
);
CREATE INDEX IF NOT EXISTS traffic_bucket ON traffic (bucket);
