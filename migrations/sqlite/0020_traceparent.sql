-- The W3C traceparent a notification was enqueued in (README, Traces): its attempts link to
-- that trace, and each of its outbox events carries it to the sinks. Older rows have none. The
-- PostgreSQL twin is migrations/postgres/0020_traceparent.sql.
ALTER TABLE notifications ADD COLUMN traceparent text;
ALTER TABLE outbox ADD COLUMN traceparent text;
