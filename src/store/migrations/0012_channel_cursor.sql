-- 0012_channel_cursor.sql — how far payonce has walked a channel's own
-- record of its notifications (issue 23: Stripe's /v1/events, recovering
-- webhooks that never came): per tenant and channel, the creation time
-- (Unix s) of the newest event of the last whole walk.
CREATE TABLE IF NOT EXISTS channel_cursor (
    tenant_id   TEXT NOT NULL,
    channel     TEXT NOT NULL,
    name        TEXT NOT NULL,
    value       BIGINT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, channel, name)
);
