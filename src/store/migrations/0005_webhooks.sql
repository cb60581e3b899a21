-- 0005_webhooks.sql — tenant events (issue 12): the transactional outbox
-- and its delivery to the tenants' own endpoints.

-- Every effect a tenant cares about writes one row here in the transaction
-- that made it (docs/webhooks.md). event_id is derived from the effect's
-- idempotency key and the event type, so a replay can never make a second,
-- different event for the same fact (the primary key refuses it).
-- object_id/obj_seq order the events of one object (an order and its
-- refunds): obj_seq comes from pay_order.event_seq, bumped under the
-- order's row lock by each event of that order (0: no order).
CREATE TABLE IF NOT EXISTS outbox_event (
    tenant_id   TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    type        TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    obj_seq     BIGINT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    fanned      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX IF NOT EXISTS outbox_event_page ON outbox_event (tenant_id, created_at, event_id);
CREATE INDEX IF NOT EXISTS outbox_event_unfanned ON outbox_event (fanned, created_at);

ALTER TABLE pay_order ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;

-- A tenant's endpoints; secret is sealed with the master key. events is
-- '*' or a comma-separated list of event types. Removed endpoints are
-- kept (removed_at) so that their delivery history stays readable.
CREATE TABLE IF NOT EXISTS webhook_endpoint (
    tenant_id    TEXT NOT NULL REFERENCES tenant (tenant_id),
    endpoint_id  TEXT NOT NULL,
    url          TEXT NOT NULL,
    events       TEXT NOT NULL,
    secret       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    removed_at   TEXT,
    failing_since TEXT,
    PRIMARY KEY (tenant_id, endpoint_id)
);

-- One event to one endpoint: pending -> delivered | dead (dead -> pending
-- on redrive). claim_token/claimed_until: the worker holding the attempt
-- (another worker takes it over only after claimed_until).
CREATE TABLE IF NOT EXISTS webhook_delivery (
    tenant_id     TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    endpoint_id   TEXT NOT NULL,
    object_id     TEXT NOT NULL,
    obj_seq       BIGINT NOT NULL,
    created_at    TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       TEXT NOT NULL,
    claim_token   TEXT,
    claimed_until TEXT,
    last_status   INTEGER,
    last_error    TEXT,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, event_id, endpoint_id)
);
CREATE INDEX IF NOT EXISTS webhook_delivery_due ON webhook_delivery (state, next_at);
CREATE INDEX IF NOT EXISTS webhook_delivery_object
    ON webhook_delivery (tenant_id, endpoint_id, object_id, obj_seq);

-- Every attempt, with what the endpoint answered and how long it took.
CREATE TABLE IF NOT EXISTS webhook_attempt (
    tenant_id    TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    endpoint_id  TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    at           TEXT NOT NULL,
    status_code  INTEGER,
    latency_ms   BIGINT NOT NULL,
    error        TEXT,
    PRIMARY KEY (tenant_id, event_id, endpoint_id, attempt)
);
