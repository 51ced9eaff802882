-- The outbox relay (src/relay). An event is backlog for a sink until the sink is in its
-- `published_to` (kept on the row, so that claims read no join; `outbox_published` records
-- when each sink took it). Once every configured sink has, `published_at` is set, the event
-- leaves the relay's scans (the partial index below) and is deleted after the retention.
ALTER TABLE outbox ADD COLUMN published_to text[] NOT NULL DEFAULT '{}';
ALTER TABLE outbox ADD COLUMN published_at timestamptz;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_retention ON outbox (published_at) WHERE published_at IS NOT NULL;
-- Events of one notification reach a sink in order: the claim looks for earlier ones here.
CREATE INDEX outbox_by_notification ON outbox (notification_id, seq);

-- One relay's hold on an event for one sink: claimed until `held_until` (another relay may take it
-- after that, if this one crashed), or held back until then after a failed publish.
CREATE TABLE outbox_leases (
    event_id   uuid NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    sink       text NOT NULL,
    held_until timestamptz NOT NULL,
    failures   integer NOT NULL DEFAULT 0,   -- failed publishes of this event to this sink
    last_error text,
    PRIMARY KEY (event_id, sink)
);
