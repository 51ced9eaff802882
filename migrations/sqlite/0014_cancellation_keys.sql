-- A key an upstream sets on many notifications (one per user flow, say) to cancel together
-- those still queued: POST /v1/notifications/cancel. Older rows have none. The PostgreSQL twin is
-- migrations/postgres/0014_cancellation_keys.sql.
ALTER TABLE notifications ADD COLUMN cancellation_key text;
CREATE INDEX notifications_cancellation ON notifications (tenant, cancellation_key)
    WHERE cancellation_key IS NOT NULL;
