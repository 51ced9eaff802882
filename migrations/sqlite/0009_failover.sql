-- How many times a notification moved to its route's fallback: a notification on a fallback
-- sends under a provider key of its own (see Notification::provider_key), so that a vendor
-- account shared by two routes never takes the fallback's send for a replay of the primary's.
ALTER TABLE notifications ADD COLUMN failovers INTEGER NOT NULL DEFAULT 0;
