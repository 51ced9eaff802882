-- Deadlines and contradicting evidence. The PostgreSQL twin is
-- migrations/postgres/0011_deadlines.sql, which says what each column means.

-- SQLite adds a NOT NULL column only with a default; every row gets its value at once, and
-- every insert names it.
ALTER TABLE attempts ADD COLUMN send_deadline text NOT NULL DEFAULT '';
UPDATE attempts
    SET send_deadline = coalesce(finished_at, strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z');

ALTER TABLE notifications ADD COLUMN late_evidence boolean NOT NULL DEFAULT false;
ALTER TABLE notifications ADD COLUMN contradiction text;
ALTER TABLE notifications ADD COLUMN contradicted_at text;
CREATE INDEX notifications_contradicted ON notifications (tenant, id)
    WHERE contradiction IS NOT NULL AND NOT acknowledged;
