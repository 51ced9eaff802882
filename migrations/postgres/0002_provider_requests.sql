-- A notification's provider request, fixed at its first attempt and replayed byte for byte
-- (herald_provider::Request as JSON; the body is a JSON string, which jsonb keeps exactly).
ALTER TABLE notifications ADD COLUMN provider_request jsonb;

-- Look-alike siblings: the same route and recipient, compared by their stored request.
CREATE INDEX notifications_look_alikes ON notifications (route, recipient, created_at);

-- A vendor message found by an outcome query belongs to one notification: two settlements
-- that attribute the same message race here, and the second one loses.
CREATE UNIQUE INDEX attempts_attributed_refs ON attempts (route, provider_ref)
    WHERE settled_by = 'outcome_query' AND provider_ref IS NOT NULL;
