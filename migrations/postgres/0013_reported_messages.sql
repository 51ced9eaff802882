-- The vendor's own id of the message a callback reports, where it names one beside herald's
-- key: two ids under one key are two messages, and a second one that herald's record does not
-- account for reopens the notification as a possible duplicate. Older rows have none: their
-- reports count as one message per key, as before. The SQLite twin is
-- migrations/sqlite/0013_reported_messages.sql.
ALTER TABLE callbacks ADD COLUMN provider_ref text;
