-- Retention deletes upstream events' inbox records once their deduplication window has passed,
-- oldest first and a batch at a time; without this index each batch would read the whole inbox.
-- (Idempotency keys are found by idempotency_keys_by_notification: a notification id is a
-- UUIDv7, so it orders by creation time.)
CREATE INDEX inbox_by_received_at ON inbox (received_at);
