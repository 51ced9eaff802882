-- How many times a notification moved to its route's fallback: a notification on a fallback
-- sends under a provider key of its own (see Notification::provider_key), so that a vendor
-- account shared by two routes never takes the fallback's send for a replay of the primary's.
ALTER TABLE notifications ADD COLUMN failovers INTEGER NOT NULL DEFAULT 0;

-- A notification that failed over may have left a message on the route it left: look-alike
-- attribution there finds it by recipient among the (few) notifications that failed over.
CREATE INDEX notifications_failed_over ON notifications (recipient, created_at) WHERE failovers > 0;
