-- 0011_recon_day.sql — the daily reconciliation (issue 23, item 4): one row
-- per tenant, channel and bill day that `payonce serve` (or `payonce recon
-- fetch`) has tried. state: pending (not reconciled yet: the bill was not
-- published, could not be fetched, or did not import), done (imported: the
-- recon_run of file_sha256), none (the channel has no bill for the day: it
-- had no trades). overdue: the alert that the day missed its deadline has
-- been raised.
CREATE TABLE IF NOT EXISTS recon_day (
    tenant_id    TEXT NOT NULL,
    channel      TEXT NOT NULL,
    bill_date    TEXT NOT NULL,
    state        TEXT NOT NULL,
    attempts     BIGINT NOT NULL DEFAULT 0,
    last_error   TEXT,
    next_try_at  TEXT,
    file_sha256  TEXT,
    overdue      INTEGER NOT NULL DEFAULT 0,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, channel, bill_date)
);
