-- 0020_audit_keyed.sql — the callback record's chain nobody can re-base
-- (issue 44 item 4; docs/reliability.md, "The callback record").
--
-- callback_chain.keyed_from: the first seq whose link is keyed — HMAC-SHA-256
-- with a key derived from the master key — instead of plain SHA-256; NULL
-- while the chain was only ever sealed without a master key. Records before
-- it (sealed by an older payonce, or in development mode) keep their plain
-- links.
--
-- callback_checkpoint: the only way a chain's base moves. Each row says who
-- moved it, when and why, from which base to which (seq and hash) and how
-- far the chain went then, and carries a MAC over all of it with the chain's
-- key (plain SHA-256 for an unkeyed chain). The first keyed seal of a chain
-- writes an 'adopt' checkpoint (the base it found, and keyed_from); every
-- pruning writes a 'prune' one. `payonce audit verify` requires the series
-- to run without a gap from the chain's origin (or its adoption) to its
-- current base: a base moved by hand has no checkpoint, and one made by
-- hand has no valid MAC.
ALTER TABLE callback_chain ADD COLUMN keyed_from BIGINT;
CREATE TABLE IF NOT EXISTS callback_checkpoint (
    tenant_id     TEXT NOT NULL,
    cp_seq        BIGINT NOT NULL,
    kind          TEXT NOT NULL,
    old_base_seq  BIGINT NOT NULL,
    old_base_hash TEXT NOT NULL,
    new_base_seq  BIGINT NOT NULL,
    new_base_hash TEXT NOT NULL,
    head_seq      BIGINT NOT NULL,
    at            TEXT NOT NULL,
    who           TEXT NOT NULL,
    why           TEXT NOT NULL,
    keyed         INTEGER NOT NULL,
    mac           TEXT NOT NULL,
    PRIMARY KEY (tenant_id, cp_seq)
);
