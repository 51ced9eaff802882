-- Certainty has one author (src/domain/certainty.rs), and the database holds every write to its
-- rule: a notification is never written `known` beside an attempt that may hold a message
-- nothing accounts for — an ambiguous send nothing settled (and no late answer showed), or a
-- send whose worker said it may have left late, that no look-up waited out, no person has weighed
-- and nothing counts — and a failure or cancellation is never `known` beside a message any
-- attempt took. The same test as `certainty::open` and `certainty::took`, in SQL. Left out: a
-- send still in flight (a worker's record writes the notification before its attempt's result,
-- in one transaction), and a worker's record of a notification that evidence reached while it
-- was being sent, which the same transaction then holds against that evidence
-- (`hold_against_evidence`, which reopens it as the rule says) before it commits. The PostgreSQL twin is migrations/postgres/0022_certainty.sql.
CREATE TRIGGER notifications_known_is_earned
BEFORE UPDATE OF certainty ON notifications
WHEN NEW.certainty = 'known' AND NOT (OLD.state = 'sending' AND NEW.late_evidence) AND EXISTS (
    SELECT 1 FROM attempts a
    WHERE a.notification_id = NEW.id
      AND ((a.result = 'ambiguous' AND a.settled_by IS NULL
            AND coalesce(json_extract(a.evidence, '$.late_result.result'), '') <> 'accepted'
            AND json_extract(a.evidence, '$.late_result.provider_ref') IS NULL)
        OR (json_extract(a.evidence, '$.late_result.evidence.may_have_left_late') = 1
            AND coalesce(json_extract(a.evidence, '$.late_result_reviewed'), 0) <> 1
            AND NOT EXISTS (SELECT 1 FROM json_each(a.evidence, '$.settlement.evidence.covers_late') c
                            WHERE c.value = a.n)
            AND NOT (a.result = 'accepted'
                     OR (a.settled_by IS NOT NULL
                         AND json_extract(a.evidence, '$.settlement.outcome') = 'accepted')
                     OR json_extract(a.evidence, '$.late_result.result') = 'accepted'
                     OR json_extract(a.evidence, '$.late_result.provider_ref') IS NOT NULL))
        OR (NEW.state <> 'delivered'
            AND (a.result = 'accepted'
                 OR (a.settled_by IS NOT NULL
                     AND json_extract(a.evidence, '$.settlement.outcome') = 'accepted')
                 OR json_extract(a.evidence, '$.late_result.result') = 'accepted'
                 OR json_extract(a.evidence, '$.late_result.provider_ref') IS NOT NULL))))
BEGIN
    SELECT RAISE(ABORT, 'herald: a known certainty refused beside a send that may have reached a vendor');
END;

-- A cancellation of a notification that may already have reached its vendor waits in review
-- (reason may_have_sent): the review queue and its gauges read these by this index.
CREATE INDEX notifications_may_have_sent ON notifications (tenant, id)
    WHERE state = 'cancelled' AND certainty = 'unknown';

-- Queued notifications by expiry: a claim ends those whose expiry passed on any route, held or
-- not, so that an expiry is never late because a circuit, a pause or a pace held its route.
CREATE INDEX notifications_expiring ON notifications (expires_at)
    WHERE state = 'queued' AND expires_at IS NOT NULL;
