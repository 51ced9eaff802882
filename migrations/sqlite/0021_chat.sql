-- The chat channel: a message to a team's chat channel (a Slack channel id as the recipient).
-- Notifications and suppressions may now name it. SQLite cannot change a CHECK in place, so
-- both tables are rebuilt with the same columns in the same order, and their indexes with them.
-- The PostgreSQL twin is migrations/postgres/0021_chat.sql.
--
-- Attempts, receipts and the rest refer to notifications by name. Dropping the old table
-- orphans their rows for a moment, so foreign keys are checked at commit, when the rebuilt
-- table holds every row again: nothing is unchecked, only checked later.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE notifications_v20 AS SELECT * FROM notifications;
DROP TABLE notifications;
CREATE TABLE notifications (
    id               blob PRIMARY KEY,            -- UUIDv7: sorts by creation time
    tenant           text NOT NULL,
    channel          text NOT NULL CHECK (channel IN ('email', 'sms', 'push', 'webhook', 'chat')),
    recipient        text NOT NULL,
    route            text NOT NULL,
    delivery         text NOT NULL CHECK (delivery IN ('at_most_once', 'at_least_once')),
    content          text NOT NULL,
    metadata         text NOT NULL,
    state            text NOT NULL
        CHECK (state IN ('queued', 'sending', 'delivered', 'failed', 'unknown', 'cancelled')),
    certainty        text CHECK (certainty IN ('known', 'duplicate_possible', 'unknown')),
    acknowledged     boolean NOT NULL DEFAULT 0,
    -- Fencing token: bumped by every claim; a record only lands where it still matches.
    generation       bigint NOT NULL DEFAULT 0,
    attempt_count    integer NOT NULL DEFAULT 0,
    send_at          text,
    -- queued: when the next try is due. sending: when the lease ends (then anyone may recover it).
    due_at           text NOT NULL,
    created_at       text NOT NULL,
    updated_at       text NOT NULL,
    finished_at      text,
    provider_request text,
    key_epoch        integer NOT NULL DEFAULT 0,
    budget_from      integer NOT NULL DEFAULT 0,
    budget_since     text,
    failovers        integer NOT NULL DEFAULT 0,
    late_evidence    boolean NOT NULL DEFAULT false,
    contradiction    text,
    contradicted_at  text,
    cancellation_key text,
    expires_at       text,
    category         text,
    traceparent      text,
    CHECK ((state IN ('delivered', 'failed', 'unknown', 'cancelled')) = (certainty IS NOT NULL))
);
INSERT INTO notifications SELECT * FROM notifications_v20;
DROP TABLE notifications_v20;
CREATE INDEX notifications_due ON notifications (due_at) WHERE state IN ('queued', 'sending');
CREATE INDEX notifications_by_tenant ON notifications (tenant, id DESC);
CREATE INDEX notifications_review ON notifications (tenant, id)
    WHERE state = 'unknown' OR (certainty = 'duplicate_possible' AND NOT acknowledged);
CREATE INDEX notifications_look_alikes ON notifications (route, recipient, created_at);
CREATE INDEX notifications_failed ON notifications (tenant, id) WHERE state = 'failed';
CREATE INDEX notifications_due_by_tenant ON notifications (tenant, due_at)
    WHERE state IN ('queued', 'sending');
CREATE INDEX notifications_failed_over ON notifications (recipient, created_at) WHERE failovers > 0;
CREATE INDEX notifications_contradicted ON notifications (tenant, id)
    WHERE contradiction IS NOT NULL AND NOT acknowledged;
CREATE INDEX notifications_cancellation ON notifications (tenant, cancellation_key)
    WHERE cancellation_key IS NOT NULL;

CREATE TABLE suppressions_v20 AS SELECT * FROM suppressions;
DROP TABLE suppressions;
CREATE TABLE suppressions (
    tenant     text NOT NULL,
    channel    text NOT NULL CHECK (channel IN ('email', 'sms', 'push', 'webhook', 'chat')),
    recipient  text NOT NULL,
    category   text NOT NULL DEFAULT '',
    reason     text NOT NULL CHECK (reason IN ('bounced', 'complained', 'unsubscribed', 'manual')),
    source     text NOT NULL,
    evidence   text NOT NULL,
    note       text,
    created_at text NOT NULL,
    PRIMARY KEY (tenant, channel, recipient, category)
);
INSERT INTO suppressions SELECT * FROM suppressions_v20;
DROP TABLE suppressions_v20;
