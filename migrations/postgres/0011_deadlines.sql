-- Deadlines and contradicting evidence. The SQLite twin is migrations/sqlite/0011_deadlines.sql.

-- Each attempt's send deadline: its call to the vendor starts no later than this, and the call
-- is cut at the route's timeout (and a second), so nothing of the attempt reaches the vendor
-- after that. Every proof that an attempt was not taken ("not found after it could last have
-- been processed") reads it. Attempts written before this migration keep the bound herald used
-- then (the time their result was recorded) or, still in flight, the time of the migration:
-- every older herald process must be stopped before it runs, for they do not keep deadlines
-- (and can no longer start an attempt, which needs this column).
ALTER TABLE attempts ADD COLUMN send_deadline timestamptz;
UPDATE attempts SET send_deadline = coalesce(finished_at, now());
ALTER TABLE attempts ALTER COLUMN send_deadline SET NOT NULL;

-- Evidence that came while the notification was being sent or after it was recorded (a late
-- answer to an attempt whose lease was lost, a vendor's report): the next record, and the
-- arrival itself, hold the record against it.
ALTER TABLE notifications ADD COLUMN late_evidence boolean NOT NULL DEFAULT false;
-- Set when such evidence contradicted what was recorded and reopened it: why, and when. It is
-- in review (reason `contradicted`) until a person acknowledges it.
ALTER TABLE notifications ADD COLUMN contradiction text;
ALTER TABLE notifications ADD COLUMN contradicted_at timestamptz;
CREATE INDEX notifications_contradicted ON notifications (tenant, id)
    WHERE contradiction IS NOT NULL AND NOT acknowledged;
