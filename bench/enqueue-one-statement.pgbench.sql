-- The rows of one herald single enqueue (see enqueue.pgbench.sql) written by one statement in
-- autocommit: the idempotency key, the notification (only if the key was new), its `accepted`
-- outbox event, and the pg_notify. One round trip and one commit: what the same work costs
-- the database without a conversation around it.

\set k random(1, 9007199254740991)
WITH r AS (
    SELECT bench_uuid7() AS id, bench_uuid7() AS event, 'reference-one-' || :k::text AS key,
           (to_json(now() AT TIME ZONE 'UTC') #>> '{}') || 'Z' AS at
), claimed AS (
    INSERT INTO idempotency_keys
        (tenant, key, request_hash, response_status, response_body, notification_id, created_at)
    SELECT 'dev', r.key, sha256(convert_to(r.key, 'UTF8')), 202,
           format('{"acknowledged": false,"attempts": [],"certainty": null,"channel":"email",'
                  '"created_at":"%2$s","delivery":"at_most_once","id":"%1$s","metadata": {},'
                  '"next_attempt_at":"%2$s","review": null,"route":"sandbox","send_at": null,'
                  '"state":"queued","subject":"Your export is ready",'
                  '"text":"Download it within seven days.","to":"%3$s@bench.example",'
                  '"updated_at":"%2$s"}', r.id, r.at, r.key)::jsonb,
           r.id, now()
    FROM r
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING notification_id
), notification AS (
    INSERT INTO notifications
        (id, tenant, channel, recipient, route, delivery, content, metadata, state,
         send_at, due_at, created_at, updated_at)
    SELECT c.notification_id, 'dev', 'email', r.key || '@bench.example', 'sandbox',
           'at_most_once',
           '{"subject":"Your export is ready","text":"Download it within seven days."}', '{}',
           'queued', NULL, now(), now(), now()
    FROM claimed c, r
), event AS (
    INSERT INTO outbox (id, tenant, notification_id, type, data, created_at)
    SELECT r.event, 'dev', c.notification_id, 'dev.herald.notification.accepted',
           format('{"certainty": null,"id":"%s","metadata": {},"state":"queued"}',
                  c.notification_id)::jsonb,
           now()
    FROM claimed c, r
)
SELECT pg_notify('herald_due', '');
