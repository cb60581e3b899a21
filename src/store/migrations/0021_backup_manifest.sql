-- 0021_backup_manifest.sql — what a backup says it holds (issue 44 item 5;
-- docs/operations.md, "Backup and restore"). `payonce backup` writes one row
-- into the copy it made (never into the live database): a manifest of the
-- security-relevant rows — operators and their sessions, API keys, webhook
-- endpoints, channel accounts — each as a digest of its fields, and every
-- tenant's callback chain head and base, with a MAC by a key derived from
-- the master key. `payonce restore` recomputes it from the backup and
-- refuses a copy whose rows differ (naming them), whose MAC does not match,
-- or whose callback chain does not verify.
CREATE TABLE IF NOT EXISTS backup_manifest (
    made_at   TEXT NOT NULL PRIMARY KEY,
    manifest  TEXT NOT NULL
);
