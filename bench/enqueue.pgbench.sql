-- One herald single enqueue, as the store commits it (src/store/sql.rs, try_accept with one
-- item; the SQL text of CLAIM_KEY, INSERT_NOTIFICATION and INSERT_EVENT, then wake_others):
-- BEGIN, claim the idempotency key, insert the notification, insert its `accepted` outbox
-- event, pg_notify, COMMIT: six round trips, one commit. bench/reference.sh runs it with
-- pgbench -M prepared on herald's schema plus bench/uuid7.sql.
--
-- Where it differs from herald, and why:
-- * The key claim returns the new notification's id (\gset): the id is made by the database
--   here (pgbench cannot make a UUID), and the later statements need it. Same round trips.
-- * Values herald binds as parameters are partly literals here (the content, the route); the
--   JSON that holds the key, the id or the time is made per row and parsed per row, as
--   herald's is. Keys are random, not sequential.
-- * A colon in the SQL text that is followed by a letter is a pgbench variable, so the JSON
--   templates have a space after such colons, and times are written without to_char's
--   "HH24:MI:SS"; the stored jsonb is the same.
-- * sqlx also checks a pooled connection before each transaction (an extra Sync round trip);
--   that is the pool's, not the statements', and is not reproduced: herald pays it, this
--   reference does not.

\set k random(1, 9007199254740991)
BEGIN;
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
FROM (SELECT bench_uuid7() AS id, 'reference-' || :k::text AS key,
             (to_json(now() AT TIME ZONE 'UTC') #>> '{}') || 'Z' AS at) r
ON CONFLICT (tenant, key) DO NOTHING
RETURNING notification_id AS nid \gset
INSERT INTO notifications
    (id, tenant, channel, recipient, route, delivery, content, metadata, state,
     send_at, due_at, created_at, updated_at)
VALUES (:nid::uuid, 'dev', 'email', 'reference-' || :k::text || '@bench.example', 'sandbox', 'at_most_once',
        '{"subject":"Your export is ready","text":"Download it within seven days."}', '{}',
        'queued', NULL, now(), now(), now());
INSERT INTO outbox (id, tenant, notification_id, type, data, created_at)
VALUES (bench_uuid7(), 'dev', :nid::uuid, 'dev.herald.notification.accepted',
        format('{"certainty": null,"id":"%s","metadata": {},"state":"queued"}', :nid::text)::jsonb,
        now());
SELECT pg_notify('herald_due', '');
COMMIT;
