-- A time after which no attempt starts (expires_at or ttl_seconds at enqueue): dispatch ends a
-- notification still queued then as failed, "expired", without a vendor call. Older rows have
-- none. The SQLite twin is migrations/sqlite/0015_expiry.sql.
ALTER TABLE notifications ADD COLUMN expires_at timestamptz;
