-- issue 28 item 1: the database writes down what changes the ledger outside
-- payonce's own path. payonce never updates or deletes a journal, a posting
-- or a processed record, and never writes a second payment journal for an
-- order or a second refund journal for a refund; a trigger records each of
-- these (a manual fix in SQL, a restore gone wrong, a bug) in ledger_change,
-- and serve's ledger check (every ledger-check-ms) re-checks the rows it
-- names with payonce verify's invariants, raises the alert, counts it and
-- removes the row. Normal traffic fires none of the UPDATE/DELETE triggers;
-- the journal's INSERT trigger costs one probe of journal_order.
CREATE TABLE IF NOT EXISTS ledger_change (
    tenant_id    TEXT NOT NULL,
    change_id    TEXT NOT NULL,
    tbl          TEXT NOT NULL,
    row_key      TEXT NOT NULL,
    op           TEXT NOT NULL,
    out_trade_no TEXT,
    changed_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, change_id)
);

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS posting_updated AFTER UPDATE ON posting BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'posting', OLD.idem_key || ' line ' || OLD.line_no, 'UPDATE', NULL, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS posting_deleted AFTER DELETE ON posting BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'posting', OLD.idem_key || ' line ' || OLD.line_no, 'DELETE', NULL, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS journal_updated AFTER UPDATE ON journal BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'journal', OLD.idem_key, 'UPDATE', OLD.out_trade_no, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS journal_deleted AFTER DELETE ON journal BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'journal', OLD.idem_key, 'DELETE', OLD.out_trade_no, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS journal_second AFTER INSERT ON journal WHEN (NEW.kind = 'PAY' AND EXISTS (SELECT 1 FROM journal j WHERE j.tenant_id = NEW.tenant_id AND j.out_trade_no = NEW.out_trade_no AND j.kind = 'PAY' AND j.idem_key <> NEW.idem_key)) OR (NEW.kind = 'REFUND' AND EXISTS (SELECT 1 FROM journal j WHERE j.tenant_id = NEW.tenant_id AND j.out_trade_no = NEW.out_trade_no AND j.out_refund_no = NEW.out_refund_no AND j.kind = 'REFUND' AND j.idem_key <> NEW.idem_key)) BEGIN INSERT INTO ledger_change VALUES (NEW.tenant_id, lower(hex(randomblob(12))), 'journal', NEW.idem_key, 'SECOND ' || NEW.kind, NEW.out_trade_no, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS notify_log_updated AFTER UPDATE ON notify_log BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'notify_log', OLD.idem_key, 'UPDATE', OLD.out_trade_no, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: sqlite
CREATE TRIGGER IF NOT EXISTS notify_log_deleted AFTER DELETE ON notify_log BEGIN INSERT INTO ledger_change VALUES (OLD.tenant_id, lower(hex(randomblob(12))), 'notify_log', OLD.idem_key, 'DELETE', OLD.out_trade_no, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')); END;

-- only: postgres
CREATE OR REPLACE FUNCTION payonce_ledger_changed() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE k TEXT; o TEXT; BEGIN k := OLD.idem_key; o := NULL; IF TG_TABLE_NAME = 'posting' THEN k := OLD.idem_key || ' line ' || OLD.line_no; ELSE o := OLD.out_trade_no; END IF; INSERT INTO ledger_change VALUES (OLD.tenant_id, gen_random_uuid()::text, TG_TABLE_NAME, k, TG_OP, o, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')); RETURN NULL; END $$;

-- only: postgres
CREATE OR REPLACE FUNCTION payonce_ledger_second() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF EXISTS (SELECT 1 FROM journal j WHERE j.tenant_id = NEW.tenant_id AND j.out_trade_no = NEW.out_trade_no AND j.kind = NEW.kind AND j.idem_key <> NEW.idem_key AND (NEW.kind = 'PAY' OR j.out_refund_no = NEW.out_refund_no)) THEN INSERT INTO ledger_change VALUES (NEW.tenant_id, gen_random_uuid()::text, 'journal', NEW.idem_key, 'SECOND ' || NEW.kind, NEW.out_trade_no, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')); END IF; RETURN NULL; END $$;

-- only: postgres
CREATE OR REPLACE TRIGGER posting_changed AFTER UPDATE OR DELETE ON posting FOR EACH ROW EXECUTE FUNCTION payonce_ledger_changed();

-- only: postgres
CREATE OR REPLACE TRIGGER journal_changed AFTER UPDATE OR DELETE ON journal FOR EACH ROW EXECUTE FUNCTION payonce_ledger_changed();

-- only: postgres
CREATE OR REPLACE TRIGGER notify_log_changed AFTER UPDATE OR DELETE ON notify_log FOR EACH ROW EXECUTE FUNCTION payonce_ledger_changed();

-- only: postgres
CREATE OR REPLACE TRIGGER journal_second AFTER INSERT ON journal FOR EACH ROW WHEN (NEW.kind IN ('PAY', 'REFUND')) EXECUTE FUNCTION payonce_ledger_second();
