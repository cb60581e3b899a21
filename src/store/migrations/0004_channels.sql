-- 0004_channels.sql — channel_account without a fixed list of channels in
-- the schema (the registry in src/channel/registry.c decides which exist,
-- so adding a channel needs no migration), and a version that every
-- `payonce channel set` bumps, so a gateway can tell cheaply that an
-- account it holds in memory is stale.

CREATE TABLE channel_account_v4 (
    tenant_id   TEXT NOT NULL REFERENCES tenant (tenant_id),
    channel     TEXT NOT NULL,
    config      TEXT NOT NULL,
    version     BIGINT NOT NULL DEFAULT 1,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, channel)
);
INSERT INTO channel_account_v4 (tenant_id, channel, config, version, updated_at)
    SELECT tenant_id, channel, config, 1, updated_at FROM channel_account;
DROP TABLE channel_account;
ALTER TABLE channel_account_v4 RENAME TO channel_account;
