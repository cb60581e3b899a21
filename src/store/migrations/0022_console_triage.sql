-- 0022_console_triage.sql — the console for triage (issue 45 item 3).
--
-- callback_delivery names the event each verified callback carried: its
-- type (PAY_SUCCESS, REFUND_SUCCESS, …) and, for a refund's, the refund
-- number. NULL for the rows written before, and for a verified callback
-- that carried no event payonce could read (refused, ignored, unmapped).
ALTER TABLE callback_delivery ADD COLUMN event_type TEXT;
ALTER TABLE callback_delivery ADD COLUMN out_refund_no TEXT;

-- The refunds still PROCESSING, across tenants oldest first: a partial index
-- holds only those (a refund leaves it when it ends), so the console's list
-- and count read no finished refund; the refund path writes one small index
-- more, the payment path none.
CREATE INDEX IF NOT EXISTS refund_processing ON refund (created_at, tenant_id, out_refund_no)
    WHERE status = 'PROCESSING';

-- An endpoint's deliveries by state: its dead letters newest first, its
-- pending and dead counts, and redrive by endpoint read only those (the
-- other indexes give an endpoint's deliveries of every state, or every
-- endpoint's of one). Written by the webhook worker (fan-out, each
-- delivery's end), never by a callback.
CREATE INDEX IF NOT EXISTS webhook_delivery_endpoint
    ON webhook_delivery (tenant_id, endpoint_id, state, created_at);

-- Reconciliation days newest first across tenants; and what the last
-- fetch of the day came to (imported, none, not_ready, failed), so that a
-- day the channel has not published yet is told apart from one whose
-- fetch failed (NULL: not fetched since this column came).
CREATE INDEX IF NOT EXISTS recon_day_date ON recon_day (bill_date, tenant_id, channel);
ALTER TABLE recon_day ADD COLUMN last_fetch TEXT;

-- What operators did from the console besides working alerts (those are
-- in alert_action): a webhook endpoint's dead deliveries sent again, a
-- reconciliation day fetched again. Who (the operator's name, or
-- "dashboard" for the admin token), when, what (target: the endpoint or
-- event id; channel and bill day), their note as written, and what came
-- of it. Written by the action's own code, never edited.
CREATE TABLE IF NOT EXISTS console_action (
    tenant_id  TEXT NOT NULL,
    action_id  TEXT NOT NULL,
    at         TEXT NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL CHECK (action IN ('webhook_redrive', 'recon_fetch')),
    target     TEXT NOT NULL,
    note       TEXT NOT NULL,
    result     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, action_id)
);
CREATE INDEX IF NOT EXISTS console_action_at ON console_action (tenant_id, at);
