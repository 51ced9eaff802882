-- Vendor callbacks: delivery receipts that only move forward, the callback inbox that makes a
-- repeated vendor event change nothing, and per-tenant suppressions with their audit trail.
-- The PostgreSQL twin is migrations/postgres/0010_callbacks.sql.

-- A callback may settle an ambiguous attempt (`settled_by = 'callback'`). SQLite cannot change
-- a CHECK in place, so the table is rebuilt with the same columns in the same order.
CREATE TABLE attempts_v10 (
    notification_id          blob NOT NULL REFERENCES notifications (id),
    n                        integer NOT NULL,
    generation               bigint NOT NULL,
    route                    text NOT NULL,
    provider_idempotency_key text NOT NULL,
    started_at               text NOT NULL,
    finished_at              text,
    result                   text NOT NULL
        CHECK (result IN ('in_flight', 'accepted', 'rejected', 'ambiguous')),
    permanent                boolean,
    provider_ref             text,
    evidence                 text NOT NULL,
    settled_by               text
        CHECK (settled_by IN ('outcome_query', 'idempotent_replay', 'review', 'callback')),
    PRIMARY KEY (notification_id, n)
);
INSERT INTO attempts_v10 SELECT * FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v10 RENAME TO attempts;
CREATE UNIQUE INDEX attempts_attributed_refs ON attempts (route, provider_ref)
    WHERE settled_by = 'outcome_query' AND provider_ref IS NOT NULL;
-- A callback that names only the vendor's message id finds its attempt by it.
CREATE INDEX attempts_by_provider_ref ON attempts (route, provider_ref)
    WHERE provider_ref IS NOT NULL;

-- Each vendor event once per route: a repeat finds its row and changes nothing. The provider
-- key it named (if it named one) and what it said stay, so that a worker that records an
-- ambiguity after the report came can still settle it by the report.
CREATE TABLE callbacks (
    route           text NOT NULL,
    event_id        text NOT NULL,
    notification_id blob NOT NULL REFERENCES notifications (id),
    provider_key    text,
    status          text NOT NULL,
    received_at     text NOT NULL,
    PRIMARY KEY (route, event_id)
);
CREATE INDEX callbacks_by_notification ON callbacks (notification_id);

-- A notification's receipt history: only moves forward (`rank` grows with `seq`); the last row
-- is its receipt.
CREATE TABLE receipts (
    notification_id blob NOT NULL REFERENCES notifications (id),
    seq             integer NOT NULL,
    status          text NOT NULL
        CHECK (status IN ('sent', 'delivered', 'bounced', 'undeliverable', 'complained')),
    rank            integer NOT NULL,
    at              text NOT NULL,
    source          text NOT NULL,
    vendor_status   text NOT NULL,
    event_id        text NOT NULL,
    received_at     text NOT NULL,
    PRIMARY KEY (notification_id, seq)
);

-- Recipients not to send to, per tenant and channel (`recipient` as the send compares it).
CREATE TABLE suppressions (
    tenant     text NOT NULL,
    channel    text NOT NULL CHECK (channel IN ('email', 'sms', 'push', 'webhook')),
    recipient  text NOT NULL,
    reason     text NOT NULL CHECK (reason IN ('bounced', 'complained', 'unsubscribed', 'manual')),
    source     text NOT NULL,
    evidence   text NOT NULL,
    note       text,
    created_at text NOT NULL,
    PRIMARY KEY (tenant, channel, recipient)
);

-- Who added or lifted which suppression, when and why: kept after a suppression is lifted.
CREATE TABLE suppression_log (
    seq        integer PRIMARY KEY AUTOINCREMENT,
    tenant     text NOT NULL,
    channel    text NOT NULL,
    recipient  text NOT NULL,
    action     text NOT NULL CHECK (action IN ('added', 'lifted')),
    reason     text NOT NULL,
    principal  text NOT NULL,
    note       text,
    evidence   text NOT NULL,
    at         text NOT NULL
);
CREATE INDEX suppression_log_by_recipient ON suppression_log (tenant, channel, recipient, seq);
