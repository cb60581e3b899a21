-- 0007_alert_workflow.sql — alerts an operator works through (issue 13
-- item 9): every alert is open, acknowledged or resolved; who moved it
-- last, when and why is on the alert, and every move is kept in
-- alert_action (the audit trail). An alert's id is its alert_key.
ALTER TABLE alert ADD COLUMN state TEXT NOT NULL DEFAULT 'open'
    CHECK (state IN ('open', 'acknowledged', 'resolved'));
ALTER TABLE alert ADD COLUMN state_by TEXT;
ALTER TABLE alert ADD COLUMN state_note TEXT;
ALTER TABLE alert ADD COLUMN state_at TEXT;
CREATE INDEX IF NOT EXISTS alert_state ON alert (tenant_id, state, created_at);

CREATE TABLE IF NOT EXISTS alert_action (
    tenant_id  TEXT NOT NULL,
    alert_key  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    action     TEXT NOT NULL CHECK (action IN ('acknowledge', 'resolve', 'replay')),
    actor      TEXT NOT NULL,
    note       TEXT,
    at         TEXT NOT NULL,
    PRIMARY KEY (tenant_id, alert_key, seq),
    FOREIGN KEY (tenant_id, alert_key) REFERENCES alert (tenant_id, alert_key)
);
