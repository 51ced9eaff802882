-- Idempotency keys by the notification they created. The key is claimed before its notification
-- exists (a deferred foreign key), so inserting the notification makes the database look for
-- the keys that reference it: without this index SQLite scanned every key on every enqueue,
-- which made each enqueue slower than the last. Deleting a notification needs the same look-up.
CREATE INDEX idempotency_keys_by_notification ON idempotency_keys (notification_id);
