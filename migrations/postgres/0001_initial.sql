-- herald's tables. States and results are text with CHECK constraints (the names of
-- CONTRACT.md); every time is timestamptz. The SQLite twin is migrations/sqlite/0001_initial.sql.

CREATE TABLE notifications (
    id               uuid PRIMARY KEY,            -- UUIDv7: sorts by creation time
    tenant           text NOT NULL,
    channel          text NOT NULL CHECK (channel IN ('email', 'sms', 'push', 'webhook')),
    recipient        text NOT NULL,
    route            text NOT NULL,
    delivery         text NOT NULL CHECK (delivery IN ('at_most_once', 'at_least_once')),
    content          jsonb NOT NULL,
    metadata         jsonb NOT NULL,
    state            text NOT NULL
        CHECK (state IN ('queued', 'sending', 'delivered', 'failed', 'unknown', 'cancelled')),
    certainty        text CHECK (certainty IN ('known', 'duplicate_possible', 'unknown')),
    acknowledged     boolean NOT NULL DEFAULT false,
    -- Fencing token: bumped by every claim; a record only lands where it still matches.
    generation       bigint NOT NULL DEFAULT 0,
    attempt_count    integer NOT NULL DEFAULT 0,
    send_at          timestamptz,
    -- queued: when the next try is due. sending: when the lease ends (then anyone may recover it).
    due_at           timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    CHECK ((state IN ('delivered', 'failed', 'unknown', 'cancelled')) = (certainty IS NOT NULL))
);
CREATE INDEX notifications_due ON notifications (due_at) WHERE state IN ('queued', 'sending');
CREATE INDEX notifications_by_tenant ON notifications (tenant, id DESC);
CREATE INDEX notifications_review ON notifications (tenant, id)
    WHERE state = 'unknown' OR (certainty = 'duplicate_possible' AND NOT acknowledged);

CREATE TABLE attempts (
    notification_id          uuid NOT NULL REFERENCES notifications (id),
    n                        integer NOT NULL,
    generation               bigint NOT NULL,
    route                    text NOT NULL,
    provider_idempotency_key text NOT NULL,
    started_at               timestamptz NOT NULL,
    finished_at              timestamptz,
    result                   text NOT NULL
        CHECK (result IN ('in_flight', 'accepted', 'rejected', 'ambiguous')),
    permanent                boolean,
    provider_ref             text,
    evidence                 jsonb NOT NULL,
    settled_by               text CHECK (settled_by IN ('outcome_query', 'idempotent_replay', 'review')),
    PRIMARY KEY (notification_id, n)
);

CREATE TABLE idempotency_keys (
    tenant          text NOT NULL,
    key             text NOT NULL,
    request_hash    bytea NOT NULL,   -- SHA-256 of the canonical request body
    response_status integer NOT NULL,
    response_body   jsonb NOT NULL,
    notification_id uuid NOT NULL REFERENCES notifications (id)
        DEFERRABLE INITIALLY DEFERRED,   -- the key is claimed before the row exists
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant, key)
);

-- CloudEvents waiting to be (or already) published; one row per state change.
CREATE TABLE outbox (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              uuid NOT NULL UNIQUE,         -- the CloudEvents id; a republish reuses it
    tenant          text NOT NULL,
    notification_id uuid NOT NULL,
    type            text NOT NULL,
    data            jsonb NOT NULL,
    created_at      timestamptz NOT NULL
);

-- Which sink has published which event. An event without a row here for a sink is backlog.
CREATE TABLE outbox_published (
    event_id     uuid NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    sink         text NOT NULL,
    published_at timestamptz NOT NULL,
    PRIMARY KEY (event_id, sink)
);

-- Upstream CloudEvents already turned into notifications; the key decides races.
CREATE TABLE inbox (
    tenant           text NOT NULL,
    source           text NOT NULL,
    event_id         text NOT NULL,
    notification_ids jsonb NOT NULL,
    received_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant, source, event_id)
);

-- The audit trail of review: who settled what, when, and why.
CREATE TABLE resolutions (
    notification_id uuid NOT NULL REFERENCES notifications (id),
    seq             integer NOT NULL,
    principal       text NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('delivered', 'not_delivered', 'acknowledged')),
    then_action     text CHECK (then_action IN ('resend', 'close')),
    note            text NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (notification_id, seq)
);
