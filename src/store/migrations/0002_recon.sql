-- 0002_recon.sql — reconciliation runs and per-row channel fees.

-- One imported bill file per tenant: importing the same file again finds
-- its run and changes nothing. period_* are the bill's trade dates.
CREATE TABLE IF NOT EXISTS recon_run (
    tenant_id     TEXT NOT NULL,
    file_sha256   TEXT NOT NULL,
    channel       TEXT NOT NULL,
    period_start  TEXT NOT NULL,
    period_end    TEXT NOT NULL,
    rows_total    BIGINT NOT NULL,
    report        TEXT NOT NULL,
    imported_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, file_sha256)
);

-- The channel's fee for each bill row (settlement reporting). fee_milli is
-- thousandths of the minor unit (the bill states fees to 0.00001 yuan).
CREATE TABLE IF NOT EXISTS recon_fee (
    tenant_id      TEXT NOT NULL,
    channel        TEXT NOT NULL,
    row_key        TEXT NOT NULL,
    out_trade_no   TEXT NOT NULL,
    trade_date     TEXT NOT NULL,
    fee_milli      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, channel, row_key)
);
