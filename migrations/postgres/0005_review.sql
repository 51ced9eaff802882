-- On-call review. A resend after review may renew the provider key (past the vendor's
-- idempotency window) and starts a fresh budget of attempts and age; every resolution keeps
-- what it changed and under which risk.
ALTER TABLE notifications ADD COLUMN key_epoch integer NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN budget_from integer NOT NULL DEFAULT 0;
ALTER TABLE notifications ADD COLUMN budget_since timestamptz;

ALTER TABLE resolutions ADD COLUMN state_before text;
ALTER TABLE resolutions ADD COLUMN certainty_before text;
ALTER TABLE resolutions ADD COLUMN state_after text;
ALTER TABLE resolutions ADD COLUMN certainty_after text;
ALTER TABLE resolutions ADD COLUMN forced boolean NOT NULL DEFAULT false;
ALTER TABLE resolutions ADD COLUMN key_renewed boolean NOT NULL DEFAULT false;

-- Dead letters (failed notifications) are listed by tenant, oldest first.
CREATE INDEX notifications_failed ON notifications (tenant, id) WHERE state = 'failed';

-- Claims let tenants take turns: each tenant's due work, oldest first.
CREATE INDEX notifications_due_by_tenant ON notifications (tenant, due_at)
    WHERE state IN ('queued', 'sending');
