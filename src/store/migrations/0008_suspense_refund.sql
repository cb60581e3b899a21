-- 0008_suspense_refund.sql — clearing money parked in suspense (issue 13
-- item 9): a paid_after_close or duplicate_payment is refunded to the payer
-- through the engine like any refund, but against the suspense payment, not
-- the order's. suspense_key is that payment's idempotency key (its SUSPENSE
-- journal's key); txn_id the channel transaction refunded. Such a refund
-- reserves nothing on the order and its success posts suspense -> clearing.
-- At most one such refund per suspense payment is live (not CLOSED).
ALTER TABLE refund ADD COLUMN suspense_key TEXT;
ALTER TABLE refund ADD COLUMN txn_id TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS refund_suspense_live ON refund (tenant_id, suspense_key)
    WHERE suspense_key IS NOT NULL AND status <> 'CLOSED';

-- The audit trail gains three moves: 'refund' (an operator asked for the
-- suspense payment to be refunded), 'refunded' (the engine applied the
-- channel's success) and 'accept' (an operator accepted a refund the channel
-- made after payonce had closed it as the order's). A CHECK constraint cannot be altered in SQLite, so
-- the small table is rebuilt, the same way on both stores.
CREATE TABLE alert_action_v8 (
    tenant_id  TEXT NOT NULL,
    alert_key  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    action     TEXT NOT NULL
        CHECK (action IN ('acknowledge', 'resolve', 'replay', 'refund', 'refunded', 'accept')),
    actor      TEXT NOT NULL,
    note       TEXT,
    at         TEXT NOT NULL,
    PRIMARY KEY (tenant_id, alert_key, seq),
    FOREIGN KEY (tenant_id, alert_key) REFERENCES alert (tenant_id, alert_key)
);
INSERT INTO alert_action_v8 (tenant_id, alert_key, seq, action, actor, note, at)
    SELECT tenant_id, alert_key, seq, action, actor, note, at FROM alert_action;
DROP TABLE alert_action;
ALTER TABLE alert_action_v8 RENAME TO alert_action;
