-- 0014_alert_notify.sql — alerts that reach people (issue 26 item 2): what
-- was last said about each alert to the operator's receivers (an
-- Alertmanager or Slack webhook, email) and when, so that serve's notifier
-- sends a new alert once (after its group's wait), repeats a group still
-- firing after the repeat interval, and says once that an alert was
-- resolved. notified_state: NULL (never said), 'firing' or 'resolved'.
ALTER TABLE alert ADD COLUMN notified_state TEXT
    CHECK (notified_state IS NULL OR notified_state IN ('firing', 'resolved'));
ALTER TABLE alert ADD COLUMN notified_at TEXT;
CREATE INDEX IF NOT EXISTS alert_notify ON alert (notified_state, state);
