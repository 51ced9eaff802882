-- Fills a PostgreSQL database that herald has migrated with :stored finished notifications, as
-- herald itself would have left them (bench/growth.sh runs this with psql; variables: stored,
-- span_days, keep_outbox). Each notification was enqueued, delivered at its first attempt
-- through the built-in sandbox route, and its two events (accepted, delivered) were published to
-- the relay's default sink, `log`:
--
--   notifications     state delivered, certainty known, generation 1, one attempt, the provider
--                     request fixed at the first claim
--   attempts          n 1, accepted, the sandbox's message id and its response as evidence
--   idempotency_keys  the key, the request's SHA-256 and the 202 answer stored for replays
--   outbox            the two events, published to `log` (only with keep_outbox; otherwise the
--   outbox_published  relay's retention has deleted them, as it does a day after publishing)
--
-- Shapes follow what herald writes (src/store/sql.rs, src/store/mod.rs, src/api, the sandbox
-- adapter). Creation times are spread evenly over the :span_days days before now, ids are UUIDv7
-- of those times (so the rows sit in index order behind anything enqueued now), recipients
-- repeat (200,000 of them), keys are random UUIDs.

\set ON_ERROR_STOP on

BEGIN;

-- A UUIDv7 of time t; the random bits come from md5(salt), so every id is reproducible.
CREATE FUNCTION pg_temp.growth_v7(t timestamptz, salt text) RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0')
            || '7' || substr(h, 1, 3)
            || substr('89ab', 1 + get_byte(decode(h, 'hex'), 15) % 4, 1)
            || substr(h, 4, 15))::uuid
    FROM (SELECT md5(salt) AS h) s
$$;

-- herald's API times: RFC 3339 in UTC.
CREATE FUNCTION pg_temp.growth_time(t timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT (to_json(t AT TIME ZONE 'UTC') #>> '{}') || 'Z'
$$;

CREATE TEMP TABLE growth ON COMMIT DROP AS
SELECT i, id, created, started, finished, key, recipient,
       pg_temp.growth_v7(finished, 'message' || i) AS message,
       pg_temp.growth_v7(created, 'accepted' || i) AS accepted_event,
       pg_temp.growth_v7(finished, 'delivered' || i) AS delivered_event
FROM (
    SELECT i, pg_temp.growth_v7(created, 'notification' || i) AS id, created,
           created + interval '8 milliseconds' AS started,
           created + interval '16 milliseconds' AS finished,
           md5('key' || i)::uuid::text AS key,
           'customer-' || (i % 200000) || '@example.com' AS recipient
    FROM (
        SELECT i, now() - make_interval(days => :span_days)
                  + (i - 1) * ((make_interval(days => :span_days) - interval '1 minute') / :stored)
                  AS created
        FROM generate_series(1, :stored) AS i
    ) times
) rows;

INSERT INTO notifications
    (id, tenant, channel, recipient, route, delivery, content, metadata, state, certainty,
     acknowledged, generation, attempt_count, send_at, due_at, created_at, updated_at,
     finished_at, provider_request, key_epoch, budget_from, budget_since)
SELECT id, 'dev', 'email', recipient, 'sandbox', 'at_most_once',
       '{"subject": "Your export is ready", "text": "Download it within seven days."}',
       '{}', 'delivered', 'known', false, 1, 1, NULL, finished, created, finished, finished,
       jsonb_build_object('body', format(
           '{"reference":"%s","channel":"email","to":"%s","subject":"Your export is ready",'
           '"text":"Download it within seven days."}', id, recipient)),
       0, 0, NULL
FROM growth ORDER BY i;

INSERT INTO attempts
    (notification_id, n, generation, route, provider_idempotency_key, started_at, finished_at,
     send_deadline, result, permanent, provider_ref, evidence, settled_by)
SELECT id, 1, 1, 'sandbox', id::text, started, finished, finished, 'accepted', NULL,
       'sbx_' || message,
       jsonb_build_object(
           'stage', 'response', 'status', 202,
           'detail', format('{"id":"sbx_%s","reference":"%s","status":"accepted"}', message, id)),
       NULL
FROM growth ORDER BY i;

INSERT INTO idempotency_keys
    (tenant, key, request_hash, response_status, response_body, notification_id, created_at)
SELECT 'dev', key, sha256(convert_to(key, 'UTF8')), 202,
       jsonb_build_object(
           'acknowledged', false, 'attempts', '[]'::jsonb, 'certainty', 'null'::jsonb,
           'channel', 'email', 'created_at', pg_temp.growth_time(created),
           'delivery', 'at_most_once', 'id', id, 'metadata', '{}'::jsonb,
           'next_attempt_at', pg_temp.growth_time(created), 'review', 'null'::jsonb,
           'route', 'sandbox', 'send_at', 'null'::jsonb, 'state', 'queued',
           'subject', 'Your export is ready', 'text', 'Download it within seven days.',
           'to', recipient, 'updated_at', pg_temp.growth_time(created)),
       id, created
FROM growth ORDER BY i;

\if :keep_outbox
-- In the order herald wrote them: by time, each notification's accepted event before its
-- delivered one.
INSERT INTO outbox
    (id, tenant, notification_id, type, data, created_at, published_to, published_at)
SELECT event, 'dev', id, type,
       jsonb_build_object('id', id, 'state', state, 'metadata', '{}'::jsonb,
                          'certainty', certainty),
       at, '{log}', at + published_after
FROM (
    SELECT i, 0 AS k, accepted_event AS event, id, 'dev.herald.notification.accepted' AS type,
           'queued' AS state, 'null'::jsonb AS certainty, created AS at,
           interval '200 milliseconds' AS published_after
    FROM growth
    UNION ALL
    SELECT i, 1, delivered_event, id, 'dev.herald.notification.delivered', 'delivered',
           '"known"'::jsonb, finished, interval '400 milliseconds'
    FROM growth
) events
ORDER BY at, i, k;

INSERT INTO outbox_published (event_id, sink, published_at)
SELECT id, 'log', published_at FROM outbox ORDER BY seq;
\endif

COMMIT;

-- What autovacuum would have done by now on a database that filled up over days.
VACUUM ANALYZE;
